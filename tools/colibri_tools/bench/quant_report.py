"""colibri-quant-report: what quantization does to a model, measured by
running its float32 image and a quantized image (colibri-convert --quant) on
the same prompts through the engine (docs/quantization.md):

- top-1 agreement: how often both pick the same next token;
- KL(p_fp32 || p_quant) of the next-token distribution, mean and max;
- perplexity of both on a text, when a tokenizer is there;
- router agreement: the fraction of (token, MoE layer) pairs whose selected
  expert set differs from the float32 run's, and the mean |delta| of the
  routing weights (over the union of both selections, an expert a run did
  not select counting with weight 0).

    colibri-quant-report FP32_IMAGE QUANT_IMAGE [--ids 1,2,3 ...] [--prompts FILE]
                         [--text FILE] [--tokenizer model_tokenizer.json] [--json]
    colibri-quant-report FP32_IMAGE QUANT_IMAGE --widths [--json]

--widths lists the image's recipe instead: every quantized matrix's dtype,
bytes, bits a weight and relative weight error (quant_widths_report.py).

Prompts: each --ids is one prompt; --prompts has a prompt per line (ids
separated by commas or spaces, or text for the tokenizer); --text is
tokenized and cut into windows of --window tokens. With none of them, four
prompts of random ids (seeded) are used, and the report says so.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ..errors import ColibriError, OptionError
from ..version import add_version_option

TOKENIZER_FILE = "model_tokenizer.json"
RANDOM_PROMPTS, RANDOM_LENGTH = 4, 64


@dataclass
class Comparison:
    """Sums over every compared position; finish() turns them into the report."""

    positions: int = 0
    top1_same: int = 0
    kl: list[float] = field(default_factory=list)
    nll_fp32: list[float] = field(default_factory=list)
    nll_quant: list[float] = field(default_factory=list)
    route_pairs: int = 0
    route_differ: int = 0
    weight_deltas: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class Report:
    prompts: int
    positions: int
    source: str
    top1_agreement: float
    kl_mean: float
    kl_max: float
    perplexity_fp32: float | None
    perplexity_quant: float | None
    router_pairs: int
    router_set_differs: float | None
    router_weight_delta: float | None


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    x = logits.astype(np.float64)
    return x - np.logaddexp.reduce(x, axis=-1, keepdims=True)


def compare_logits(acc: Comparison, ids: Sequence[int], ref: np.ndarray, quant: np.ndarray,
                   perplexity: bool) -> None:
    """Row t of the logits predicts ids[t + 1]."""
    lp, lq = _log_softmax(ref), _log_softmax(quant)
    acc.positions += len(ids)
    acc.top1_same += int(np.sum(ref.argmax(-1) == quant.argmax(-1)))
    acc.kl += (np.exp(lp) * (lp - lq)).sum(-1).tolist()
    if perplexity and len(ids) > 1:
        nxt = np.asarray(ids[1:])
        rows = np.arange(len(ids) - 1)
        acc.nll_fp32 += (-lp[rows, nxt]).tolist()
        acc.nll_quant += (-lq[rows, nxt]).tolist()


def compare_routes(acc: Comparison, experts: tuple[np.ndarray, np.ndarray],
                   weights: tuple[np.ndarray, np.ndarray]) -> None:
    """experts/weights [positions, layers, top_k] of both runs; layers whose
    entries are -1 (dense) are skipped."""
    (e_ref, e_q), (w_ref, w_q) = experts, weights
    for t in range(e_ref.shape[0]):
        for layer in range(e_ref.shape[1]):
            a, b = e_ref[t, layer], e_q[t, layer]
            if a[0] < 0:
                continue
            acc.route_pairs += 1
            acc.route_differ += int(set(a.tolist()) != set(b.tolist()))
            wa = dict(zip(a.tolist(), w_ref[t, layer].tolist()))
            wb = dict(zip(b.tolist(), w_q[t, layer].tolist()))
            acc.weight_deltas += [abs(wa.get(e, 0.0) - wb.get(e, 0.0)) for e in set(wa) | set(wb)]


def finish(acc: Comparison, prompts: int, source: str) -> Report:
    def ppl(nll: list[float]) -> float | None:
        return float(np.exp(np.mean(nll))) if nll else None

    return Report(
        prompts, acc.positions, source, acc.top1_same / max(acc.positions, 1),
        float(np.mean(acc.kl)) if acc.kl else 0.0, float(np.max(acc.kl)) if acc.kl else 0.0,
        ppl(acc.nll_fp32), ppl(acc.nll_quant), acc.route_pairs,
        acc.route_differ / acc.route_pairs if acc.route_pairs else None,
        float(np.mean(acc.weight_deltas)) if acc.weight_deltas else None)


def _engine(path: Path, context: int, threads: int | None):
    from ..runtime.engine import Engine

    return Engine(path, context=context, threads=threads, routes=True)


def run_report(fp32_image: str | Path, quant_image: str | Path, prompts: list[list[int]], *,
               source: str = "ids", perplexity: bool = False,
               threads: int | None = None) -> Report:
    """Run every prompt (from an empty state) through both images and compare."""
    if not prompts or any(len(p) == 0 for p in prompts):
        raise OptionError("no prompt, or an empty one")
    context = max(len(p) for p in prompts)
    acc = Comparison()
    with _engine(Path(fp32_image), context, threads) as ref, \
            _engine(Path(quant_image), context, threads) as quant:
        if ref.vocab_size != quant.vocab_size or ref.hparams["n_layers"] != \
                quant.hparams["n_layers"]:
            raise OptionError("the two images are not the same model (vocab or layers differ)")
        for ids in prompts:
            runs = []
            for engine in (ref, quant):
                engine.reset()
                logits = engine.forward(ids, logits="all")
                runs.append((logits, engine.routes.experts[:len(ids)].copy(),
                             engine.routes.weights[:len(ids)].copy()))
            compare_logits(acc, ids, runs[0][0], runs[1][0], perplexity)
            compare_routes(acc, (runs[0][1], runs[1][1]), (runs[0][2], runs[1][2]))
    return finish(acc, len(prompts), source)


def _parse_ids(text: str, vocab_hint: str) -> list[int]:
    try:
        return [int(t) for t in text.replace(",", " ").split()]
    except ValueError:
        raise OptionError(f"{vocab_hint}: not a list of token ids: {text[:40]!r}") from None


def _tokenizer(path: Path | None):
    if path is None or not path.is_file():
        return None
    from ..runtime.generate import load_tokenizer

    return load_tokenizer(path)


def gather_prompts(args: argparse.Namespace) -> tuple[list[list[int]], str, bool]:
    """(prompts, what they are, whether perplexity means anything)."""
    tokenizer_path = args.tokenizer or Path(args.fp32_image).parent / TOKENIZER_FILE
    tokenizer = _tokenizer(Path(tokenizer_path))
    prompts: list[list[int]] = [_parse_ids(i, "--ids") for i in args.ids or []]
    text_seen = False
    if args.prompts is not None:
        for line in Path(args.prompts).read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if not line:
                continue
            if line.replace(",", " ").replace(" ", "").isdigit():
                prompts.append(_parse_ids(line, str(args.prompts)))
            elif tokenizer is None:
                raise OptionError(f"{args.prompts}: a text prompt needs a tokenizer "
                                  f"(--tokenizer, or {TOKENIZER_FILE} beside the image)")
            else:
                prompts.append(list(tokenizer.encode(line).ids))
                text_seen = True
    if args.text is not None:
        if tokenizer is None:
            raise OptionError(f"--text needs a tokenizer (--tokenizer, or {TOKENIZER_FILE} beside "
                              "the image)")
        ids = list(tokenizer.encode(Path(args.text).read_text(encoding="utf-8")).ids)
        prompts += [ids[i:i + args.window] for i in range(0, len(ids), args.window)
                    if len(ids[i:i + args.window]) > 1]
        text_seen = True
    if prompts:
        return prompts, "text" if text_seen else "ids", text_seen
    from ..image.image_reader import read_image

    vocab = read_image(args.fp32_image).record.vocab_size
    rng = np.random.default_rng(0)
    return ([rng.integers(0, vocab, RANDOM_LENGTH).tolist() for _ in range(RANDOM_PROMPTS)],
            "random ids (seed 0)", False)


def render(report: Report, fp32_image: str, quant_image: str) -> str:
    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.2f} %"

    lines = [f"float32: {fp32_image}", f"quantized: {quant_image}",
             f"prompts: {report.prompts} ({report.source}), {report.positions} positions",
             f"top-1 agreement: {pct(report.top1_agreement)}",
             f"KL(fp32 || quant) of the next token: mean {report.kl_mean:.3e}, max "
             f"{report.kl_max:.3e}"]
    if report.perplexity_fp32 is not None:
        lines.append(f"perplexity: fp32 {report.perplexity_fp32:.3f}, quantized "
                     f"{report.perplexity_quant:.3f}")
    if report.router_pairs:
        lines.append(f"router: expert set differs for {pct(report.router_set_differs)} of "
                     f"{report.router_pairs} (token, layer) pairs; mean |delta weight| "
                     f"{report.router_weight_delta:.3e}")
    else:
        lines.append("router: no MoE layer")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="colibri-quant-report", description="Compare a quantized "
                                "image with its float32 image on the same prompts: top-1 "
                                "agreement, KL of the next-token distribution, perplexity, and "
                                "what quantization does to the router.")
    p.add_argument("fp32_image", type=Path, help="the float32 model.bin")
    p.add_argument("quant_image", type=Path, help="the same model converted with --quant")
    p.add_argument("--ids", action="append", help="a prompt as token ids (1,2,3); repeatable")
    p.add_argument("--prompts", type=Path, help="a file with a prompt per line: ids, or text")
    p.add_argument("--text", type=Path, help="a text, cut into windows of --window tokens "
                   "(perplexity is reported)")
    p.add_argument("--window", type=int, default=128, help="tokens per --text window (default "
                   "128)")
    p.add_argument("--tokenizer", type=Path, help=f"tokenizer.json (default: {TOKENIZER_FILE} "
                   "beside FP32_IMAGE)")
    p.add_argument("--threads", type=int, default=None, help="engine threads (default: all)")
    p.add_argument("--widths", action="store_true", help="instead: each quantized matrix's "
                   "dtype (the recipe), bytes, bits a weight and relative weight error, per "
                   "layer and expert (no prompts are run)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    add_version_option(p)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.widths:
        return _widths(args)
    try:
        if args.window < 2:
            raise OptionError("--window must be at least 2")
        prompts, source, perplexity = gather_prompts(args)
        report = run_report(args.fp32_image, args.quant_image, prompts, source=source,
                            perplexity=perplexity, threads=args.threads)
    except (ColibriError, OSError) as exc:
        print(f"colibri-quant-report: error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(asdict(report), indent=1))
    else:
        print(render(report, str(args.fp32_image), str(args.quant_image)))
    return 0


def _widths(args: argparse.Namespace) -> int:
    from .quant_widths_report import matrix_widths, render_widths

    try:
        rows = matrix_widths(args.fp32_image, args.quant_image)
    except (ColibriError, OSError) as exc:
        print(f"colibri-quant-report: error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps([asdict(r) for r in rows], indent=1) if args.json else render_widths(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
