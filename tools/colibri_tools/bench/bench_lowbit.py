"""colibri-bench --formats: Colibri's weight formats (the super-blocks qk2 ..
qk6, or int4, int8, f32) beside llama.cpp's types (Q2_K, Q3_K_M, Q4_K_M,
Q4_0, IQ3_XXS, ...) on one checkpoint, in one run.

    colibri-bench --formats qk2,qk3,qk4 --llama-types Q2_K,Q3_K_M,Q4_K_M,Q4_0,IQ3_XXS \\
                  --llama-bench PATH [shape options]          (the random model)
    colibri-bench --formats ... --llama-types ... --llama-bench PATH --hf DIR \\
                  --eval-text TEXT [--calibration TEXT]       (a trained checkpoint)

Colibri: `colibri-convert --quant FORMAT --quant-attention --quant-embeddings`
(with --calibration: importance-weighted super-blocks; a converter that
refuses the option converts without it, and the report says so). llama.cpp:
the F32 GGUF quantized by llama-quantize with its defaults, and with
--calibration with the importance matrix llama-imatrix makes of the same text
(the GGUF then carries the checkpoint's tokenizer, which llama-imatrix needs).

Per format: bits per weight of the whole file and of the routed expert
matrices, fidelity against transformers' float32 logits (bench_fidelity.py;
prompts are windows of --eval-text, or random ids), then prompt and decode
speed, every engine and format interleaved in each repetition, and for every
Colibri format the ratios to each llama.cpp type of the same nominal bits.
"""
from __future__ import annotations

import argparse
import math
import os
import pathlib
import re
import statistics
import tempfile

import numpy as np

from . import bench_fidelity as fid


def nominal_bits(name: str) -> int:
    """The bit width a format's name says: qk3, Q3_K_M, IQ3_XXS -> 3; int4 -> 4;
    f32, F32 -> 32."""
    found = re.search(r"\d+", name)
    if found is None:
        raise ValueError(f"{name}: no bit width in the name")
    return int(found.group())


def bits_per_weight(nbytes: int, weights: int) -> float:
    return 8 * nbytes / weights if weights else float("nan")


def colibri_sizes(image_path: pathlib.Path) -> dict:
    """Bytes of the whole image, and bytes and weights of its routed experts."""
    from ..image.image_reader import read_image
    from ..image.image_spec import NO_EXPERT

    experts = [t for t in read_image(image_path).tensors if t.expert != NO_EXPERT]
    return {"bytes": image_path.stat().st_size, "expert_bytes": sum(t.size for t in experts),
            "expert_weights": sum(math.prod(t.shape) for t in experts)}


def text_prompts(ids: list[int], count: int, length: int) -> list[list[int]]:
    """`count` windows of `length` tokens spread evenly over ids (a held-out text)."""
    if len(ids) < length:
        raise ValueError(f"{len(ids)} tokens of text, a prompt takes {length}")
    last = len(ids) - length
    starts = [round(i * last / (count - 1)) for i in range(count)] if count > 1 else [0]
    return [ids[s:s + length] for s in starts]


def pair_ratios(speeds: list[dict]) -> list[dict]:
    """Colibri / llama.cpp prompt and decode speed for each pair of formats of
    the same nominal bits, at each thread count."""
    ours = [r for r in speeds if r["engine"] == "colibri"]
    peers = [r for r in speeds if r["engine"] == "llama.cpp"]
    return [{"colibri": c["weights"], "llama.cpp": p["weights"], "threads": c["threads"],
             "prompt": c["prompt_tok_s"] / p["prompt_tok_s"],
             "decode": c["decode_tok_s"] / p["decode_tok_s"]}
            for c in ours for p in peers
            if c["threads"] == p["threads"] and nominal_bits(c["weights"]) ==
            nominal_bits(p["weights"])]


def paired_kl(ours: list[float], peer: list[float]) -> dict:
    """Per-prompt mean KLs of two engines on the same prompts: the mean of the
    differences (ours - peer), its standard error over prompts, and on how
    many prompts ours is lower."""
    diff = np.asarray(ours, dtype=np.float64) - np.asarray(peer, dtype=np.float64)
    se = diff.std(ddof=1) / np.sqrt(diff.size) if diff.size > 1 else 0.0
    return {"kl_diff": float(diff.mean()), "kl_diff_se": float(se),
            "lower_on": int(np.count_nonzero(diff < 0)), "prompts": int(diff.size)}


def kl_pairs(rows: list[dict]) -> list[dict]:
    """paired_kl of every Colibri format against each llama.cpp type of the same
    nominal bits (fidelity rows)."""
    ours = [r for r in rows if r["engine"] == "colibri"]
    peers = [r for r in rows if r["engine"] == "llama.cpp"]
    return [{"colibri": c["weights"], "llama.cpp": p["weights"],
             **paired_kl(c["kl_prompt_means"], p["kl_prompt_means"])}
            for c in ours for p in peers if nominal_bits(c["weights"]) == nominal_bits(p["weights"])]


def _checkpoint(args: argparse.Namespace, work: pathlib.Path):
    """(float32 transformers model, its checkpoint directory, tokenizer.json or None)."""
    if args.hf is None:
        from .bench_model import random_model

        return random_model(args, work), work / "hf", None
    import torch
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(args.hf, dtype=torch.float32).eval()
    tokenizer = args.hf / "tokenizer.json"
    return model, args.hf, tokenizer if tokenizer.is_file() else None


def target_bpw(fmt: str) -> float | None:
    """bpw3.0 -> 3.0 (widths chosen by colibri-convert --target-bpw); else None."""
    return float(fmt[3:]) if fmt.startswith("bpw") else None


def _convert(hf_dir: pathlib.Path, out: pathlib.Path, fmt: str, calibration) -> bool:
    """One Colibri image: a --quant name, f32, or bpwB (--target-bpw B); True
    when it is importance-weighted by calibration (the super-block ones)."""
    from ..converter.convert import convert

    target = target_bpw(fmt)
    quant = None if fmt == "f32" or target is not None else fmt
    weighted = calibration is not None and (target is not None or fmt.startswith("qk"))
    convert(hf_dir, out, progress=False, quant=quant, target_bpw=target,
            quant_attention=fmt != "f32", quant_embeddings=fmt != "f32",
            calibration=calibration if weighted else None)
    return weighted


def colibri_images(args: argparse.Namespace, hf_dir: pathlib.Path, work: pathlib.Path) -> dict:
    """{format: (image path, calibrated)} for --formats."""
    return {fmt: (work / fmt / "model.bin",
                  _convert(hf_dir, work / fmt, fmt, args.calibration)) for fmt in args.formats}


def llama_files(args: argparse.Namespace, model, tokenizer, work: pathlib.Path) -> dict:
    """{type: (GGUF path, calibrated)} for --llama-types and the F32 floor."""
    from .bench_llama import make_imatrix, quantize_gguf, write_gguf

    bench = pathlib.Path(args.llama_bench)
    f32 = write_gguf(model, work / "model.gguf", tokenizer if args.calibration else None)
    imatrix = None
    if args.calibration:
        imatrix = make_imatrix(bench, f32, args.calibration, model.config.max_position_embeddings,
                               max(args.threads))
    files = {kind: (quantize_gguf(bench, f32, kind, imatrix=imatrix), imatrix is not None)
             for kind in args.llama_types if kind != "F32"}
    return {**files, "F32": (f32, False)}


def fidelity_prompts(args: argparse.Namespace, tokenizer, vocab: int) -> list[list[int]]:
    if args.eval_text is None:
        return fid.prompts(vocab, args.fidelity_prompts, args.fidelity_length)
    from tokenizers import Tokenizer

    ids = Tokenizer.from_file(str(tokenizer)).encode(args.eval_text.read_text("utf-8")).ids
    return text_prompts(list(ids), args.fidelity_prompts, args.fidelity_length)


def _fidelity_rows(args, model, prompts, images: dict, ggufs: dict, work) -> list[dict]:
    from .bench_llama import build_llama_logits, gguf_sizes, llama_logits

    vocab = model.config.vocab_size
    reference = [fid.torch_logits(model, ids) for ids in prompts]
    rows = []
    for fmt, (path, calibrated) in images.items():
        run = fid.colibri_logits(path)
        rows.append({"engine": "colibri", "weights": fmt, "calibrated": calibrated,
                     **colibri_sizes(path), **fid.fidelity(reference, [run(i) for i in prompts])})
    exe = build_llama_logits(pathlib.Path(args.llama_bench), work) if ggufs else None
    for kind, (path, calibrated) in ggufs.items():
        got = [llama_logits(exe, path, ids, vocab) for ids in prompts]
        rows.append({"engine": "llama.cpp", "weights": kind, "calibrated": calibrated,
                     **gguf_sizes(path), **fid.fidelity(reference, got)})
    return rows


def _speed_rows(args, vocab: int, images: dict, ggufs: dict) -> list[dict]:
    """Median prompt and decode speeds, every engine and format interleaved in
    each repetition (F32 and f32 are fidelity floors: not timed)."""
    from .bench_llama import run_llama_bench
    from .bench_timing import time_colibri

    ids = [(7 * i + 3) % vocab for i in range(args.prompt)]
    engines = [("colibri", f, p) for f, (p, _) in images.items() if f != "f32"]
    engines += [("llama.cpp", k, p) for k, (p, _) in ggufs.items() if k != "F32"]
    runs = {(e, w, t): [] for e, w, _ in engines for t in args.threads}
    for _ in range(args.repeat):
        for threads in args.threads:
            for engine, weights, path in engines:
                runs[(engine, weights, threads)].append(
                    time_colibri(path, ids, args.gen, threads, args.kernels)
                    if engine == "colibri" else
                    run_llama_bench(pathlib.Path(args.llama_bench), path, len(ids), args.gen,
                                    threads))
    return [{"engine": e, "weights": w, "threads": t, "kernels": r[0].get("kernels"),
             **{k: statistics.median(x[k] for x in r) for k in ("prompt_tok_s", "decode_tok_s")}}
            for (e, w, t), r in runs.items()]


def run_lowbit(args: argparse.Namespace) -> dict:
    from .bench_timing import cpu_description

    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        work = pathlib.Path(tmp)
        model, hf_dir, tokenizer = _checkpoint(args, work)
        params = sum(p.numel() for p in model.parameters())
        images = colibri_images(args, hf_dir, work)
        ggufs = llama_files(args, model, tokenizer, work) if args.llama_bench else {}
        prompts = fidelity_prompts(args, tokenizer, model.config.vocab_size)
        rows = _fidelity_rows(args, model, prompts, images, ggufs, work)
        speeds = _speed_rows(args, model.config.vocab_size, images, ggufs)
    kernels = next((s["kernels"] for s in speeds if s["kernels"]), None)
    return {"model": str(args.hf) if args.hf else "random", "parameters": params,
            "calibration": str(args.calibration) if args.calibration else None,
            "eval_text": str(args.eval_text) if args.eval_text else None,
            "prompt_tokens": args.prompt, "decoded_tokens": args.gen, "repetitions": args.repeat,
            "cpu": cpu_description(), "kernels": kernels, "fidelity": rows, "speeds": speeds,
            "kl_pairs": kl_pairs(rows), "ratios": pair_ratios(speeds), "load_average": os.getloadavg()[1]}


def print_lowbit(report: dict) -> None:
    params = report["parameters"]
    print(f"model: {report['model']}, {params / 1e6:.2f} M parameters; CPU: {report['cpu']}; "
          f"Colibri's kernel table: {report['kernels']}")
    print(f"calibration: {report['calibration']}; fidelity prompts from "
          f"{report['eval_text'] or 'random ids'} ({report['fidelity'][0]['positions']} positions)")
    print(f"{'engine':10}{'weights':>9}{'calib':>6}{'file bpw':>9}{'expert bpw':>11}"
          f"{'KL mean':>11}{'+- s.e.':>10}{'top-1':>8}")
    for r in report["fidelity"]:
        print(f"{r['engine']:10}{r['weights']:>9}{'yes' if r['calibrated'] else 'no':>6}"
              f"{bits_per_weight(r['bytes'], params):9.3f}"
              f"{bits_per_weight(r['expert_bytes'], r['expert_weights']):11.3f}"
              f"{r['kl_mean']:11.3e}{r['kl_mean_se']:10.1e}{r['top1_agreement']:8.1%}")
    for r in report["kl_pairs"]:
        print(f"KL colibri {r['colibri']} - llama.cpp {r['llama.cpp']}: {r['kl_diff']:+.2e} "
              f"+- {r['kl_diff_se']:.1e} (colibri lower on {r['lower_on']} of {r['prompts']})")
    print(f"speed: prompt {report['prompt_tokens']}, decode {report['decoded_tokens']} tokens, "
          f"median of {report['repetitions']}; load average (5 min) at the end "
          f"{report['load_average']:.1f}")
    for r in report["speeds"]:
        print(f"{r['engine']:10}{r['weights']:>9}{r['threads']:3} thr{r['prompt_tok_s']:10.1f} "
              f"prompt tok/s{r['decode_tok_s']:9.1f} decode tok/s")
    for r in report["ratios"]:
        print(f"colibri {r['colibri']} / llama.cpp {r['llama.cpp']}, {r['threads']} thr: "
              f"prompt {r['prompt']:.2f}x, decode {r['decode']:.2f}x")
