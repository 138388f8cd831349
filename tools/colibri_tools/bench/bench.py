"""colibri-bench: Colibri's speed beside its peer's, on the same model in the
same run, as ratios (machines here are shared and noisy: absolute numbers
drift, ratios much less), with the machine's memory read bandwidth.

    colibri-bench [shape options] [--prompt 128] [--gen 64] [--repeat 5]
                  [--threads 1,2] [--llama-bench PATH] [--torch] [--json FILE]
    colibri-bench -m model.bin [--threads 1,2] ...     (a converted model of yours)
    colibri-bench --quant int8|int4 --llama-bench PATH  (quantized, beside Q8_0/Q4_0)
    colibri-bench --formats qk2,qk3,qk4 --llama-types Q2_K,Q3_K_M,Q4_K_M --llama-bench PATH
                  [--hf DIR --eval-text TEXT [--calibration TEXT]]
                                                        (several formats side by side, on the
                                                        random or a trained checkpoint:
                                                        bench_lowbit.py)
    colibri-bench --real olmoe-1b-7b --quant int4       (a real checkpoint's shapes)
    colibri-bench --real olmoe-1b-7b --quant int4 --budgets 100,50,25,12.5
                  [--llama-bench PATH] [--image FILE] [--gguf FILE]
                                                        (larger than memory: bench_budget.py)
    colibri-bench --emulate rpi4 [--quant int8|int4] [--llama-bench PATH]
                                                        (instructions per token on an emulated
                                                        AArch64 board: bench_emulate.py)

Builds a random-weight model of the given shape from a transformers config
(default: Mixtral architecture, 152 M parameters, 605 MB in fp32: beyond a
last-level cache) and converts it. Then, for each repetition and each thread
count, interleaved so that drift hits every engine alike:
  * the engine in this process (colibri_tools.runtime.engine, as colibri-run --preload
    --batch PROMPT): the prompt's tokens per second and the decode's (GEN
    tokens after the prompt);
  * with --llama-bench: llama.cpp's llama-bench on the same weights written
    as an F32 GGUF (pp PROMPT and tg GEN tests);
  * with --torch: transformers' forward and generate, torch on one thread.
Reports medians, ratios, and each engine's decode as a fraction of the
measured read bandwidth (bytes of weights a decoded token reads, times tokens
per second). Needs build/host/colibri-membw (make host).

With --quant int8|int4 the image stores its feed-forward and attention
matrices, its token embedding and its LM head Q8/Q4 (colibri-convert --quant
... --quant-attention --quant-embeddings: every matrix but the routers, as
llama.cpp's files have them), llama.cpp runs
the F32 GGUF quantized by its own llama-quantize to Q8_0/Q4_0, and the report
adds each engine's fidelity against transformers' float32 logits on the same
prompts (bench_fidelity.py: KL and top-1 agreement). With --real NAME the
image is a published checkpoint's shapes with random quantized weights
(bench_synth.py), run by colibri-run alone, with its size, peak RSS and a
projection to boards from their memory bandwidth.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

from ..errors import ColibriError
from ..version import add_version_option
from .bench_model import SHAPE, build_model, bytes_per_token, llama_model, llama_type, shape_of
from .bench_synth import REAL_SHAPES
from .bench_timing import cpu_description, time_colibri

REPO = pathlib.Path(__file__).resolve().parents[3]


class BenchError(ColibriError):
    """The benchmark could not run (missing binary, failed run)."""


def _stat(text: str, line: str, key: str) -> float:
    for row in text.splitlines():
        if f"{line}:" in row and f" {key}=" in row:
            return float(row.split(f" {key}=", 1)[1].split()[0])
    raise BenchError(f"colibri-run --stats printed no {line} {key}")


def time_torch(model, ids: list[int], gen: int) -> dict:
    import torch

    torch.set_num_threads(1)
    prompt = torch.tensor([ids])
    with torch.no_grad():
        start = time.perf_counter()
        model(prompt)
        prompt_s = time.perf_counter() - start
        start = time.perf_counter()
        out = model.generate(prompt, max_new_tokens=gen + 1, min_new_tokens=gen + 1,
                             do_sample=False, pad_token_id=0, eos_token_id=None)
        total_s = time.perf_counter() - start
    return {"prompt_tok_s": len(ids) / prompt_s,
            "decode_tok_s": gen / max(total_s - prompt_s, 1e-9),
            "tokens": out[0, len(ids):].tolist()}


def read_bandwidth(membw: pathlib.Path, threads: int) -> float:
    """Best-of-5 read bandwidth in GB/s over 2 GiB on `threads` threads."""
    done = subprocess.run([str(membw), "--threads", str(threads)], capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        raise BenchError(f"{membw} failed: {done.stderr.strip()}")
    return float(done.stdout.split("best_gb_per_s=")[1].split()[0])


def _median(runs: list[dict], key: str) -> float:
    return statistics.median(run[key] for run in runs)


class Peers:
    """The engines of one benchmark and how to time each."""

    def __init__(self, args: argparse.Namespace, image: pathlib.Path, model, gguf: pathlib.Path | None):
        self.args, self.image, self.model, self.gguf = args, image, model, gguf

    def names(self) -> list[str]:
        return ["colibri"] + (["llama.cpp"] if self.gguf else []) + (["torch"] if self.model and
                                                                      self.args.torch else [])

    def time(self, name: str, ids: list[int], threads: int) -> dict | None:
        from .bench_llama import run_llama_bench

        if name == "colibri":
            return time_colibri(self.image, ids, self.args.gen, threads, self.args.kernels)
        if name == "llama.cpp":
            return run_llama_bench(pathlib.Path(self.args.llama_bench), self.gguf, len(ids),
                                   self.args.gen, threads)
        return time_torch(self.model, ids, self.args.gen) if threads == 1 else None


def _measure(peers: Peers, ids: list[int]) -> dict:
    runs: dict = {(n, t): [] for n in peers.names() for t in peers.args.threads}
    for _ in range(peers.args.repeat):
        for threads in peers.args.threads:
            for name in peers.names():
                result = peers.time(name, ids, threads)
                if result is not None:
                    runs[(name, threads)].append(result)
    return runs


def _summary(runs: dict, per_token: int, bandwidth: dict) -> list[dict]:
    rows = []
    for (name, threads), results in runs.items():
        if not results:
            continue
        decode = _median(results, "decode_tok_s")
        rows.append({"engine": name, "threads": threads,
                     "prompt_tok_s": _median(results, "prompt_tok_s"), "decode_tok_s": decode,
                     "bandwidth_fraction": decode * per_token / (bandwidth[threads] * 1e9)})
    by_key = {(r["engine"], r["threads"]): r for r in rows}
    for row in rows:
        ours = by_key[("colibri", row["threads"])]
        for key in ("prompt_tok_s", "decode_tok_s"):
            row[f"colibri_ratio_{key}"] = ours[key] / row[key]
    return rows


def run_budget_bench(args: argparse.Namespace) -> dict:
    """--budgets: the real-shape image (synthesized unless --image) and, with
    --llama-bench, its GGUF twin (written unless --gguf), at each budget."""
    from . import bench_synth as synth
    from .bench_budget import run_budgets
    from .gguf_real import write_olmoe_gguf

    args.colibri_run = REPO / "build" / "host" / "colibri-run"
    if not args.colibri_run.exists():
        raise BenchError(f"{args.colibri_run} not found: run `make host` first")
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        image, gguf = args.image, args.gguf
        if image is None:
            image = pathlib.Path(tmp) / f"{args.real}-{args.quant}.bin"
            synth.synthesize(args.real, args.quant, image)
        if args.llama_bench and gguf is None:
            gguf = write_olmoe_gguf(image, pathlib.Path(tmp) / f"{args.real}.gguf")
        return run_budgets(args, image, gguf if args.llama_bench else None)


def run_benchmark(args: argparse.Namespace) -> dict:
    membw = pathlib.Path(args.membw or REPO / "build" / "host" / "colibri-membw")
    if not membw.exists():
        raise BenchError(f"{membw} not found: run `make host` first")
    if args.budgets:
        return run_budget_bench(args)
    if args.emulate:
        from .bench_emulate import run_emulate

        return run_emulate(args)
    if args.real:
        return run_real(args, membw)
    if args.llama_bench and not pathlib.Path(args.llama_bench).is_file():
        raise BenchError(f"--llama-bench {args.llama_bench}: no such file "
                         "(../shared/tools/build-llama-bench builds one)")
    if args.formats:
        from .bench_lowbit import run_lowbit

        return run_lowbit(args)
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        model, image, gguf, f32_gguf = None, args.model, None, None
        if image is None:
            model, image = build_model(args, pathlib.Path(tmp))
            if args.llama_bench:
                gguf, f32_gguf = llama_model(args, model, pathlib.Path(tmp))
        params, per_token, vocab = bytes_per_token(image)
        bandwidth = {t: read_bandwidth(membw, t) for t in args.threads}
        ids = [(7 * i + 3) % vocab for i in range(args.prompt)]
        runs = _measure(Peers(args, image, model, gguf), ids)
        report = {"model": str(args.model) if args.model else shape_of(args), "parameters": params,
                  "image_bytes": image.stat().st_size, "bytes_per_decoded_token": per_token,
                  "prompt_tokens": args.prompt, "decoded_tokens": args.gen,
                  "repetitions": args.repeat, "read_gb_per_s": bandwidth,
                  "rows": _summary(runs, per_token, bandwidth)}
        tokens = [runs[k][0]["tokens"] for k in runs if runs[k] and "tokens" in runs[k][0]]
        report["same_greedy_tokens"] = all(t == tokens[0] for t in tokens)
        report["cpu"] = cpu_description()
        report["kernels"] = next(r[0]["kernels"] for k, r in runs.items() if k[0] == "colibri")
        report["load_average"] = os.getloadavg()[1]  # 5 minutes: how shared the cores were
        if model is not None and args.quant:
            report["weights"] = {"colibri": _weights(args), "llama.cpp": llama_type(args)}
            report["fidelity"] = _fidelity(args, model, image, gguf, f32_gguf, vocab,
                                           pathlib.Path(tmp))
    return report


def run_real(args: argparse.Namespace, membw: pathlib.Path) -> dict:
    """--real NAME: synthesize the image (checking the disk first), time
    colibri-run on it, project to boards, delete the image."""
    import shutil

    from . import bench_synth as synth

    colibri_run = REPO / "build" / "host" / "colibri-run"
    work = args.work or pathlib.Path(tempfile.gettempdir())
    need = synth.planned_size(args.real, args.quant, row_groups=args.row_groups)
    free = shutil.disk_usage(work).free
    if free < need + (2 << 30):
        raise BenchError(f"{work}: {free / 1e9:.1f} GB free, the {args.real} {args.quant} image "
                         f"needs {need / 1e9:.1f} GB and 2 GiB to spare (--work DIR elsewhere)")
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        path = pathlib.Path(tmp) / f"{args.real}-{args.quant}.bin"
        start = time.perf_counter()
        synth.synthesize(args.real, args.quant, path, row_groups=args.row_groups)
        write_s = time.perf_counter() - start
        params, per_token, vocab = bytes_per_token(path)
        bandwidth = {t: read_bandwidth(membw, t) for t in args.threads}
        ids = [(7 * i + 3) % vocab for i in range(args.prompt)]
        runs = {t: [synth.run_colibri(colibri_run, path, ids, args.gen, t)
                    for _ in range(args.repeat)] for t in args.threads}
        rows = [{"threads": t, **{k: _median(r, k) for k in ("prompt_tok_s", "decode_tok_s",
                                                               "peak_rss_bytes")}}
                for t, r in runs.items()]
        for row in rows:
            row["bandwidth_fraction"] = row["decode_tok_s"] * per_token / (
                bandwidth[row["threads"]] * 1e9)
        image_bytes = path.stat().st_size
    return {"model": args.real, "quant": _weights(args), "parameters": params,
            "image_bytes": image_bytes, "bytes_per_decoded_token": per_token,
            "write_seconds": write_s, "prompt_tokens": args.prompt, "decoded_tokens": args.gen,
            "repetitions": args.repeat, "read_gb_per_s": bandwidth, "rows": rows,
            "load_average": os.getloadavg()[1],
            "projection": synth.projections(per_token, image_bytes,
                                            min(1.0, max(r["bandwidth_fraction"] for r in rows)))}


def print_real(report: dict) -> None:
    print(f"model: {report['model']} shapes, random {report['quant']} weights: "
          f"{report['parameters'] / 1e9:.2f} B parameters, image {report['image_bytes'] / 1e9:.2f} GB "
          f"(written in {report['write_seconds']:.0f} s), "
          f"{report['bytes_per_decoded_token'] / 1e6:.1f} MB read per decoded token; prompt "
          f"{report['prompt_tokens']}, decode {report['decoded_tokens']}, "
          f"median of {report['repetitions']}")
    print(f"{'threads':>8}{'prompt tok/s':>14}{'decode tok/s':>14}{'of bandwidth':>14}"
          f"{'peak RSS MB':>13}")
    for row in report["rows"]:
        print(f"{row['threads']:8}{row['prompt_tok_s']:14.2f}{row['decode_tok_s']:14.2f}"
              f"{row['bandwidth_fraction']:14.0%}{row['peak_rss_bytes'] / 1e6:13.0f}")
    print("projected decode = board bandwidth / bytes per token (bound), x the best fraction "
          "above (expected):")
    for row in report["projection"]:
        print(f"  {row['board']:18}{row['bandwidth'] / 1e9:6.1f} GB/s  bound "
              f"{row['bound_tok_s']:7.1f} tok/s  expected {row['expected_tok_s']:7.1f} tok/s")


def _weights(args: argparse.Namespace) -> str:
    """Colibri's weights as the report names them ("r16": in groups of 16 rows,
    --row-groups)."""
    return args.quant + (" r16" if args.row_groups else "")


def _fidelity(args: argparse.Namespace, model, image: pathlib.Path, gguf, f32_gguf,
              vocab: int, work: pathlib.Path) -> list[dict]:
    """Each engine's logits against transformers' float32 ones, same prompts."""
    from . import bench_fidelity as fid

    prompts = fid.prompts(vocab, args.fidelity_prompts, args.fidelity_length)
    reference = [fid.torch_logits(model, ids) for ids in prompts]
    colibri = fid.colibri_logits(image)
    rows = [{"engine": "colibri", "weights": _weights(args),
             **fid.fidelity(reference, [colibri(ids) for ids in prompts])}]
    if gguf is not None:
        from .bench_llama import build_llama_logits, llama_logits, quantize_gguf

        exe = build_llama_logits(pathlib.Path(args.llama_bench), work)
        peers = [(gguf, llama_type(args)), (f32_gguf, "F32")]
        if args.quant == "int4":  # llama-quantize's Q4_0 keeps a Q6_K output matrix: also all Q4_0
            pure = quantize_gguf(pathlib.Path(args.llama_bench), f32_gguf, "Q4_0", pure=True)
            peers.insert(1, (pure, "Q4_0 all"))
        for path, kind in peers:
            got = [llama_logits(exe, path, ids, vocab) for ids in prompts]
            rows.append({"engine": "llama.cpp", "weights": kind,
                         **fid.fidelity(reference, got)})
    return rows


def print_report(report: dict) -> None:
    model = report["model"]
    shape = model if isinstance(model, str) else " ".join(f"{k}={v}" for k, v in model.items())
    print(f"model: {shape}")
    if "cpu" in report:
        print(f"CPU: {report['cpu']}; Colibri's kernel table: {report['kernels']}")
    print(f"{report['parameters'] / 1e6:.1f} M parameters, image {report['image_bytes']} B, "
          f"{report['bytes_per_decoded_token'] / 1e6:.1f} MB of weights read per decoded token; "
          f"prompt {report['prompt_tokens']} tokens, decode {report['decoded_tokens']} tokens, "
          f"median of {report['repetitions']}")
    print("read bandwidth: " + ", ".join(f"{t} thread{'s' if t > 1 else ''} {g:.1f} GB/s"
                                          for t, g in report["read_gb_per_s"].items()))
    print(f"{'engine':10}{'threads':>8}{'prompt tok/s':>14}{'decode tok/s':>14}"
          f"{'of bandwidth':>14}{'colibri prompt':>16}{'colibri decode':>16}")
    for row in report["rows"]:
        print(f"{row['engine']:10}{row['threads']:8}{row['prompt_tok_s']:14.1f}"
              f"{row['decode_tok_s']:14.1f}{row['bandwidth_fraction']:14.0%}"
              f"{row['colibri_ratio_prompt_tok_s']:15.2f}x{row['colibri_ratio_decode_tok_s']:15.2f}x")
    print(f"same greedy tokens: {report['same_greedy_tokens']}; load average (5 min) at the "
          f"end: {report['load_average']:.1f} on {os.cpu_count()} cores")
    if "fidelity" in report:
        print("fidelity against transformers float32 logits "
              f"({report['fidelity'][0]['positions']} positions):")
        print(f"{'engine':10}{'weights':>9}{'KL mean':>12}{'+- s.e.':>11}{'KL max':>12}"
              f"{'top-1':>9}")
        for row in report["fidelity"]:
            print(f"{row['engine']:10}{row['weights']:>9}{row['kl_mean']:12.3e}"
                  f"{row['kl_mean_se']:11.1e}{row['kl_max']:12.3e}{row['top1_agreement']:9.1%}")


def _threads(text: str) -> list[int]:
    try:
        counts = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--threads {text!r}: a list like 1,2") from None
    if not counts or min(counts) < 1 or max(counts) > 64:
        raise argparse.ArgumentTypeError(f"--threads {text!r}: counts 1 .. 64")
    return sorted(set(counts))


def _percents(text: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a list of percentages") from None
    if not values or min(values) <= 0 or max(values) > 100:
        raise argparse.ArgumentTypeError("percentages are above 0 and at most 100")
    return values


QUANTS = ("int8", "int4", "qk2", "qk3", "qk4", "qk5", "qk6")
# llama-quantize types it refuses without an importance matrix (IQ3_XXS stores some matrices IQ2_S)
NEEDS_IMATRIX = ("IQ1_", "IQ2_", "IQ3_XXS", "Q2_K_S")


def _names(known: tuple[str, ...] | None, pattern: str | None = None):
    """A comma-separated list of names (of `known`, or matching `pattern`, when given)."""
    def parse(text: str) -> list[str]:
        names = [n.strip() for n in text.split(",") if n.strip()]
        bad = [n for n in names if known is not None and n not in known
               and not (pattern and re.fullmatch(pattern, n))]
        if not names or bad:
            raise argparse.ArgumentTypeError(f"{text!r}: a list of {', '.join(known or ['names'])}")
        return names
    return parse


def _check_lowbit(args: argparse.Namespace) -> str | None:
    if not args.formats:
        return ("--llama-types, --hf, --eval-text and --calibration go with --formats"
                if args.llama_types or args.hf or args.eval_text or args.calibration else None)
    if args.quant or args.model or args.real or args.emulate or args.budgets or args.torch:
        return "--formats runs its own formats (no --quant, -m, --real, --emulate, --budgets, --torch)"
    if args.llama_types and not args.llama_bench:
        return "--llama-types needs --llama-bench"
    if (args.eval_text or args.calibration) and not args.hf:
        return "--eval-text and --calibration need --hf (a checkpoint with its tokenizer)"
    if not args.calibration and any(t.startswith(NEEDS_IMATRIX) for t in args.llama_types):
        return (f"--llama-types {','.join(args.llama_types)}: llama-quantize makes "
                f"{', '.join(NEEDS_IMATRIX)}* only with an importance matrix: add --calibration")
    if args.hf is not None and not (args.hf / "config.json").is_file():
        return f"--hf {args.hf}: no config.json there"
    return None


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="colibri-bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--family", default="mixtral", choices=["mixtral", "qwen3_moe"])
    for name, default in SHAPE + (("prompt", 128), ("gen", 64), ("repeat", 5)):
        p.add_argument(f"--{name}", type=int, default=default)
    p.add_argument("--threads", type=_threads, default=[1, 2], help="thread counts (default 1,2)")
    p.add_argument("-m", "--model", type=pathlib.Path, help="benchmark this model image instead")
    p.add_argument("--llama-bench", help="llama.cpp's llama-bench binary: run it beside Colibri")
    p.add_argument("--torch", action="store_true", help="also time transformers (1 thread)")
    p.add_argument("--quant", choices=QUANTS, help="quantized weights (Q8/Q4, or super-blocks "
                   "qk2 .. qk6; llama.cpp: Q8_0/Q4_0, Q2_K, Q3_K_M .. Q5_K_M, Q6_K) and a "
                   "fidelity report")
    p.add_argument("--formats", type=_names(QUANTS + ("f32",), r"bpw\d+(\.\d+)?"),
                   help="several Colibri formats side by side (e.g. qk2,qk3,qk4; bpw3.0: the "
                   "widths colibri-convert --target-bpw 3.0 chooses), each beside --llama-types "
                   "(bench_lowbit.py)")
    p.add_argument("--llama-types", type=_names(None), default=[], help="with --formats: "
                   "llama-quantize types (e.g. Q2_K,Q3_K_M,Q4_K_M,Q4_0,IQ3_XXS)")
    p.add_argument("--hf", type=pathlib.Path, help="with --formats: this transformers Mixtral "
                   "checkpoint (e.g. trained by colibri-train-tiny) instead of the random model")
    p.add_argument("--eval-text", type=pathlib.Path, help="with --hf: fidelity prompts are "
                   "windows of this text (one the model was not trained on)")
    p.add_argument("--calibration", type=pathlib.Path, help="with --hf: a text for Colibri's "
                   "importance-weighted super-blocks and llama.cpp's llama-imatrix")
    p.add_argument("--row-groups", action=argparse.BooleanOptionalAction, help="with --quant: "
                   "the quantized matrices in groups of 16 rows, colibri-convert's default "
                   "(--no-row-groups: row by row; --real and --budgets default to row by row)")
    p.add_argument("--emulate", metavar="BOARD", help="instructions per token on this Linux "
                   "board under qemu-user (rpi4, jetson_orin_nano), beside llama.cpp built for "
                   "it with --llama-bench's source tree (bench_emulate.py)")
    p.add_argument("--real", choices=sorted(REAL_SHAPES), help="a real checkpoint's shapes "
                   "with random quantized weights (needs --quant)")
    p.add_argument("--budgets", type=_percents, help="with --real: memory budgets in percent "
                   "of the image (e.g. 100,50,25,12.5), each engine in a memory cgroup of that "
                   "size (root; bench_budget.py)")
    p.add_argument("--image", type=pathlib.Path, help="with --budgets: this synthesized image "
                   "instead of writing one")
    p.add_argument("--gguf", type=pathlib.Path, help="with --budgets and --llama-bench: this "
                   "GGUF twin of --image instead of writing one")
    p.add_argument("--seed", type=int, default=0, help="seed of the random model's weights "
                   "(default 0): another seed, another draw of the same shape")
    p.add_argument("--fidelity-prompts", type=int, default=4, help="prompts for the fidelity "
                   "report (default 4)")
    p.add_argument("--fidelity-length", type=int, default=32, help="tokens per fidelity prompt")
    p.add_argument("--kernels", help="Colibri's kernel table (default: the best this CPU "
                   "runs); e.g. avx2 times the AVX2 path on an AVX-512 machine")
    p.add_argument("--membw", help="colibri-membw binary (default build/host/colibri-membw)")
    p.add_argument("--work", type=pathlib.Path, help="directory for the temporary model files")
    p.add_argument("--json", type=pathlib.Path, help="also write the report here")
    add_version_option(p)
    return p


def _default_row_groups(args: argparse.Namespace) -> None:
    """--row-groups unsaid: colibri-convert's default, but for the real-shape
    and emulated runs (which choose their own layouts)."""
    if args.row_groups is None:
        args.row_groups = args.quant is not None and not (args.real or args.emulate)


def _check_args(args: argparse.Namespace) -> str | None:
    sizes = [getattr(args, k.replace("-", "_")) for k, _ in SHAPE] + [args.prompt, args.gen,
                                                                      args.repeat]
    if min(sizes) < 1:
        return "every size must be >= 1"
    if args.prompt > 4096 or args.gen > 4096:
        return "--prompt and --gen are at most 4096 tokens"
    if args.model is not None and not args.model.is_file():
        return f"-m {args.model}: no such file"
    if args.llama_bench and args.model is not None:
        return "--llama-bench runs on the benchmark's own model: drop -m"
    if args.budgets and (not args.real or args.quant is None or args.row_groups):
        return "--budgets needs --real and --quant (without --row-groups)"
    if (args.image or args.gguf) and not args.budgets:
        return "--image and --gguf go with --budgets"
    if args.gguf and not args.llama_bench:
        return "--gguf needs --llama-bench"
    if args.real and (args.quant is None or args.model or args.torch or
                      (args.llama_bench and not args.budgets)):
        return ("--real needs --quant and runs Colibri alone (no -m, --torch; --llama-bench "
                "only with --budgets)")
    if args.emulate and (args.model or args.torch or args.real or args.row_groups or
                         args.family != "mixtral" or args.prompt < 2):
        return ("--emulate builds its own mixtral model and counts both layouts (no -m, --torch, "
                "--real, --row-groups); --prompt at least 2")
    if args.row_groups and args.quant is None:
        return "--row-groups needs --quant"
    if args.llama_bench and args.family != "mixtral" and not args.budgets:
        return "--llama-bench takes the mixtral family"
    if min(args.fidelity_prompts, args.fidelity_length) < 1 or args.fidelity_length > 512:
        return "--fidelity-prompts >= 1 and --fidelity-length 1 .. 512"
    return _check_lowbit(args)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    _default_row_groups(args)
    problem = _check_args(args)
    if problem:
        print(f"colibri-bench: {problem}", file=sys.stderr)
        return 2
    try:
        report = run_benchmark(args)
    except ColibriError as exc:
        print(f"colibri-bench: error: {exc}", file=sys.stderr)
        return 1
    if args.budgets:
        from .bench_budget import print_budgets

        print_budgets(report)
    elif args.formats:
        from .bench_lowbit import print_lowbit

        print_lowbit(report)
    elif args.emulate:
        from .bench_emulate import print_emulate

        print_emulate(report)
    else:
        (print_real if args.real else print_report)(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
