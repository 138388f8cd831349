"""colibri-bench: measure the C engine against PyTorch/transformers on the
same model in the same run, and report ratios (machines here are shared and
noisy: absolute numbers drift, ratios much less).

    colibri-bench [--family mixtral] [--hidden 256] [--layers 4] [--experts 8]
                  [--top-k 2] [--ffn 512] [--prompt 16] [--gen 32] [--repeat 3]
                  [--json FILE]

Builds a random-weight model of the given shape from a transformers config,
converts it, then times (best of --repeat):
  * colibri-run (one thread, reference fp32 kernels): prompt and decode;
  * transformers' generate on the same weights, torch pinned to one thread.
Also reports image, state and scratch bytes and colibri-run's peak RSS.
Needs the dev extras (torch, transformers) and build/host/colibri-run.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import re
import subprocess
import sys
import tempfile
import time

from .errors import ColibriError

REPO = pathlib.Path(__file__).resolve().parents[2]


class BenchError(ColibriError):
    """The benchmark could not run (missing binary, failed run)."""


def _hf_config(args: argparse.Namespace):
    import transformers

    common = dict(vocab_size=args.vocab, hidden_size=args.hidden, num_hidden_layers=args.layers,
                  num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
                  max_position_embeddings=args.prompt + args.gen + 8, tie_word_embeddings=False)
    if args.family == "mixtral":
        return transformers.MixtralConfig(intermediate_size=args.ffn, num_local_experts=args.experts,
                                          num_experts_per_tok=args.top_k, **common)
    if args.family == "qwen3_moe":
        return transformers.Qwen3MoeConfig(moe_intermediate_size=args.ffn, intermediate_size=args.ffn,
                                           num_experts=args.experts, num_experts_per_tok=args.top_k,
                                           head_dim=args.hidden // args.heads, **common)
    raise BenchError(f"--family {args.family}: choose mixtral or qwen3_moe")


def _build(args: argparse.Namespace, work: pathlib.Path):
    import torch
    import transformers

    from .convert import convert

    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(_hf_config(args)).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.dim() >= 2:
                param.normal_(0.0, param.shape[-1] ** -0.5)
    model.save_pretrained(work / "hf")
    convert(work / "hf", work / "out", context=args.prompt + args.gen, progress=False)
    return model, work / "out" / "model.bin"


def _stat(text: str, line: str, key: str) -> float:
    match = re.search(rf"{line}:.*\b{key}=([0-9.]+)", text)
    if match is None:
        raise BenchError(f"colibri-run --stats printed no {line} {key}")
    return float(match.group(1))


def _time_colibri(binary: pathlib.Path, image: pathlib.Path, ids: list[int], gen: int) -> dict:
    cmd = [str(binary), str(image), "--ids", ",".join(map(str, ids)), "--gen", str(gen),
           "--stats"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise BenchError(f"{binary} failed: {done.stderr.strip()}")
    return {"prompt_tok_s": _stat(done.stderr, "prompt", "tokens_per_s"),
            "decode_tok_s": _stat(done.stderr, "decode", "tokens_per_s"),
            "state_bytes": int(_stat(done.stderr, "memory", "state_bytes")),
            "scratch_bytes": int(_stat(done.stderr, "memory", "scratch_bytes")),
            "peak_rss_kib": int(_stat(done.stderr, "memory", "peak_rss_kib")),
            "tokens": [int(t) for t in done.stdout.split()]}


def _time_torch(model, ids: list[int], gen: int) -> dict:
    import torch

    torch.set_num_threads(1)
    prompt = torch.tensor([ids])
    with torch.no_grad():
        start = time.perf_counter()
        model(prompt)
        prompt_s = time.perf_counter() - start
        start = time.perf_counter()
        out = model.generate(prompt, max_new_tokens=gen, min_new_tokens=gen, do_sample=False,
                             pad_token_id=0, eos_token_id=None)
        total_s = time.perf_counter() - start
    decode_s = max(total_s - prompt_s, 1e-9)
    return {"prompt_tok_s": len(ids) / prompt_s, "decode_tok_s": (gen - 1) / decode_s,
            "tokens": out[0, len(ids):].tolist()}


def _best(runs: list[dict], key: str) -> float:
    return max(run[key] for run in runs)


def run_benchmark(args: argparse.Namespace) -> dict:
    binary = pathlib.Path(args.run or REPO / "build" / "host" / "colibri-run")
    if not binary.exists():
        raise BenchError(f"{binary} not found: run `make host` first")
    with tempfile.TemporaryDirectory() as tmp:
        model, image = _build(args, pathlib.Path(tmp))
        ids = [(7 * i + 3) % args.vocab for i in range(args.prompt)]
        ours, theirs = [], []
        for _ in range(args.repeat):  # interleaved, so drift hits both alike
            ours.append(_time_colibri(binary, image, ids, args.gen))
            theirs.append(_time_torch(model, ids, args.gen))
        image_bytes = image.stat().st_size
    report = {"shape": {k: getattr(args, k) for k in
                        ("family", "vocab", "hidden", "layers", "heads", "kv_heads", "experts",
                         "top_k", "ffn", "prompt", "gen")},
              "image_bytes": image_bytes, "state_bytes": ours[0]["state_bytes"],
              "scratch_bytes": ours[0]["scratch_bytes"],
              "colibri_peak_rss_kib": max(run["peak_rss_kib"] for run in ours),
              "same_tokens": ours[0]["tokens"] == theirs[0]["tokens"]}
    for key in ("prompt_tok_s", "decode_tok_s"):
        report[f"colibri_{key}"] = _best(ours, key)
        report[f"torch_{key}"] = _best(theirs, key)
        report[f"ratio_{key}"] = report[f"colibri_{key}"] / report[f"torch_{key}"]
    return report


def _print(report: dict) -> None:
    shape = report["shape"]
    print("model: " + " ".join(f"{k}={v}" for k, v in shape.items()))
    print(f"image {report['image_bytes']} B, state {report['state_bytes']} B, "
          f"scratch {report['scratch_bytes']} B, colibri-run peak RSS "
          f"{report['colibri_peak_rss_kib']} KiB, same greedy tokens: {report['same_tokens']}")
    print(f"{'':14}{'colibri (C, 1 thread)':>24}{'torch (1 thread)':>20}{'ratio':>8}")
    for key, label in (("prompt_tok_s", "prompt tok/s"), ("decode_tok_s", "decode tok/s")):
        print(f"{label:14}{report['colibri_' + key]:24.1f}{report['torch_' + key]:20.1f}"
              f"{report['ratio_' + key]:8.2f}")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="colibri-bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--family", default="mixtral", choices=["mixtral", "qwen3_moe"])
    for name, default in (("vocab", 4096), ("hidden", 256), ("layers", 4), ("heads", 8),
                          ("kv-heads", 2), ("experts", 8), ("top-k", 2), ("ffn", 512),
                          ("prompt", 16), ("gen", 32), ("repeat", 3)):
        p.add_argument(f"--{name}", type=int, default=default)
    p.add_argument("--run", help="colibri-run binary (default build/host/colibri-run)")
    p.add_argument("--json", type=pathlib.Path, help="also write the report here")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if min(args.vocab, args.hidden, args.layers, args.heads, args.kv_heads, args.experts,
           args.top_k, args.ffn, args.prompt, args.gen, args.repeat) < 1:
        print("colibri-bench: every size must be >= 1", file=sys.stderr)
        return 2
    try:
        report = run_benchmark(args)
    except ColibriError as exc:
        print(f"colibri-bench: error: {exc}", file=sys.stderr)
        return 1
    _print(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
