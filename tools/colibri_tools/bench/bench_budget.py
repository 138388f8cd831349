"""colibri-bench --real NAME --quant int4 --budgets 100,50,25,12.5: a model
larger than its memory. For each budget (a percentage of the image), each
engine runs in a memory cgroup of exactly that many bytes, the page cache
dropped first (cgroup.py):
  * colibri: colibri-run --memory-budget BYTES (experts read into its cache);
  * paging: colibri-run on the mapped image, left to the kernel's paging;
  * llama.cpp (with --llama-bench): llama-bench on the same weights as a GGUF
    (gguf_real.py), as it runs by default (the file mapped, its Q4_0 matrices
    repacked for the CPU into anonymous memory), and with --repack 0 (the
    matrices read in place from the mapping: what lets it page).
Two routings: "own", the model's greedy decode (random weights repeat their
tokens, so the same experts come back: the easy case), and "random", each
decoded token a pseudo-random id (colibri-run --random-tokens; what
llama-bench's tg test feeds), whose expert use is near-uniform: the hard
case, and the one llama.cpp is compared in.
Then colibri-run with the image in memory (no cgroup, pages preloaded): the
speed a budget is compared with. Reported per budget: decode tokens/s, p99
token latency, megabytes read from disk per generated token, the cache's hit
rate, the cgroup's peak memory, OOM kills; ratios colibri/paging,
colibri/llama.cpp, colibri/in-memory; and the bound the disk sets on
colibri's figure (its bytes read per decoded token / the disk's measured
bandwidth for reads of one expert block).
"""
from __future__ import annotations

import mmap
import os
import pathlib
import random
import re
import time

from .bench_llama import parse_llama_bench
from .cgroup import CgroupError, run_limited, unavailable


class BudgetBenchError(CgroupError):
    """The budget benchmark cannot run here, or a run failed."""


def disk_bandwidth(path: pathlib.Path, block: int, seconds: float = 4.0) -> float:
    """Bytes per second of direct reads of `block` bytes at random aligned
    offsets of the file (what the expert cache does), one at a time."""
    size = path.stat().st_size
    align = 4096
    block = (block + align - 1) // align * align
    buf = mmap.mmap(-1, block)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    rng = random.Random(0)
    total, start = 0, time.perf_counter()
    try:
        while time.perf_counter() - start < seconds:
            offset = rng.randrange(0, (size - block) // align) * align
            total += os.preadv(fd, [buf], offset)
    finally:
        os.close(fd)
        buf.close()
    return total / (time.perf_counter() - start)


def _field(text: str, line: str, key: str) -> float:
    m = re.search(rf"{line}: .*\b{key}=([0-9.]+)", text)
    if not m:
        raise BudgetBenchError(f"colibri-run --stats printed no {line} {key}")
    return float(m[1])


ROUTINGS = {"own": (), "random": ("--random-tokens", "1")}


def _colibri_cmd(args, image: pathlib.Path, ids: list[int], routing: str,
                 *extra: str) -> list[str]:
    return [str(args.colibri_run), str(image), "--ids", ",".join(map(str, ids)), "--gen",
            str(args.gen), "--threads", str(args.threads[0]), "--batch", str(len(ids)),
            "--context", str(len(ids) + args.gen + 1), "--stats", *ROUTINGS[routing], *extra]


def _colibri_row(done, gen: int) -> dict:
    if done.returncode != 0:
        raise BudgetBenchError(f"colibri-run failed (exit {done.returncode}): "
                               f"{done.stderr.strip()[-600:]}")
    err = done.stderr
    row = {"decode_tok_s": _field(err, "decode", "tokens_per_s"),
           "p99_ms": _field(err, "decode", "p99") / 1e6,
           "whole_s": done.seconds, "peak_bytes": done.peak_bytes, "oom_kills": done.oom_kills,
           "disk_mb_per_token": done.disk_read_bytes / gen / 1e6}
    if "expert_decode:" in err:
        row["hit_rate"] = _field(err, "expert_decode", "hit_rate")
        row["read_mb_per_token"] = _field(err, "expert_decode", "bytes_per_token") / 1e6
        row["slots"] = int(_field(err, "expert_cache", "slots"))
    return row


LLAMA_MODES = {"llama.cpp": (), "llama.cpp-norepack": ("--repack", "0")}


def _llama_row(args, gguf: pathlib.Path, ids: list[int], budget: int | None,
               mode: str) -> dict:
    """llama-bench in a cgroup of `budget` bytes (None: none, caches warm)."""
    import subprocess

    cmd = [str(args.llama_bench), "-m", str(gguf), "-p", str(len(ids)), "-n", str(args.gen),
           "-t", str(args.threads[0]), "-r", "1", "-o", "jsonl", *LLAMA_MODES[mode]]
    if budget is None:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
        if done.returncode != 0:
            raise BudgetBenchError(f"llama-bench failed: {done.stderr.strip()[-600:]}")
        return {"decode_tok_s": _llama_rates(done.stdout)["decode_tok_s"]}
    done = run_limited(cmd, budget)
    if done.returncode != 0:
        return {"failed": f"exit {done.returncode}", "oom_kills": done.oom_kills,
                "peak_bytes": done.peak_bytes}
    rates = _llama_rates(done.stdout)
    return {"decode_tok_s": rates["decode_tok_s"], "whole_s": done.seconds,
            "peak_bytes": done.peak_bytes, "oom_kills": done.oom_kills,
            "disk_mb_per_token": done.disk_read_bytes / args.gen / 1e6}


def _llama_rates(stdout: str) -> dict:
    rates = parse_llama_bench(stdout)
    if "decode_tok_s" not in rates:
        raise BudgetBenchError("llama-bench printed no decode result")
    return rates


def _in_memory(args, image: pathlib.Path, ids: list[int], routing: str) -> dict:
    import subprocess

    cmd = _colibri_cmd(args, image, ids, routing, "--preload")
    subprocess.run(cmd, capture_output=True, text=True, timeout=3600)  # pages in: warm
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise BudgetBenchError(f"colibri-run failed: {done.stderr.strip()[-600:]}")
    return {"decode_tok_s": _field(done.stderr, "decode", "tokens_per_s"),
            "p99_ms": _field(done.stderr, "decode", "p99") / 1e6}


def _budget_row(args, image: pathlib.Path, gguf, ids: list[int], percent: float,
                disk_bps: float) -> dict:
    budget = int(image.stat().st_size * percent / 100)
    row = {"percent": percent, "budget_bytes": budget}
    for routing in ROUTINGS:
        cmd = _colibri_cmd(args, image, ids, routing, "--memory-budget", str(budget))
        ours = _colibri_row(run_limited(cmd, budget), args.gen)
        ours["disk_bound_tok_s"] = (disk_bps / (ours["read_mb_per_token"] * 1e6)
                                    if ours["read_mb_per_token"] > 0 else float("inf"))
        paging = run_limited(_colibri_cmd(args, image, ids, routing), budget)
        row[routing] = {"colibri": ours, "paging": _colibri_row(paging, args.gen)}
    for mode in LLAMA_MODES if gguf is not None else ():
        row["random"][mode] = _llama_row(args, gguf, ids, budget, mode)
    return row


def _ratios(row: dict, memory: dict) -> None:
    for routing, engines in row.items():
        if routing not in ROUTINGS:
            continue
        ours = engines["colibri"]
        ours["of_in_memory"] = ours["decode_tok_s"] / memory[routing]["decode_tok_s"]
        ours["x_paging"] = ours["decode_tok_s"] / engines["paging"]["decode_tok_s"]
        peers = [engines[m]["decode_tok_s"] for m in LLAMA_MODES
                 if "decode_tok_s" in engines.get(m, {})]
        if peers:  # against llama.cpp's better configuration
            ours["x_llama"] = ours["decode_tok_s"] / max(peers)


def run_budgets(args, image: pathlib.Path, gguf: pathlib.Path | None) -> dict:
    """The report of --budgets on an image (and its GGUF twin, or None)."""
    why = unavailable()
    if why:
        raise BudgetBenchError(f"--budgets: {why}")
    from ..image.image_reader import read_image

    image_info = read_image(image)
    expert = max(b.size for b in image_info.expert_blocks())
    vocab = image_info.record.vocab_size
    ids = [(7 * i + 3) % vocab for i in range(args.prompt)]
    disk_bps = disk_bandwidth(image, expert)
    rows = [_budget_row(args, image, gguf, ids, p, disk_bps) for p in args.budgets]
    memory = {routing: _in_memory(args, image, ids, routing) for routing in ROUTINGS}
    for mode in LLAMA_MODES if gguf is not None else ():
        memory[mode] = _llama_row(args, gguf, ids, None, mode)
    for row in rows:
        _ratios(row, memory)
        for mode in LLAMA_MODES:
            peer = row["random"].get(mode, {})
            if "decode_tok_s" in peer:
                peer["of_in_memory"] = peer["decode_tok_s"] / memory[mode]["decode_tok_s"]
    return {"image": str(image), "image_bytes": image.stat().st_size, "expert_bytes": expert,
            "prompt_tokens": args.prompt, "decoded_tokens": args.gen,
            "threads": args.threads[0], "disk_mb_per_s": disk_bps / 1e6,
            "in_memory": memory, "rows": rows, "load_average": os.getloadavg()[1]}


def _line(percent: float, routing: str, name: str, r: dict) -> str:
    head = f"{percent:7g}%{routing:>7}{name:>11}"
    if "failed" in r:
        return f"{head}  failed ({r['failed']}, OOM kills {r['oom_kills']})"
    extra = f"  {r['of_in_memory']:.0%} of in-memory" if "of_in_memory" in r else ""
    if name == "colibri":
        extra = (f"  {r['x_paging']:.1f}x paging, {r['of_in_memory']:.0%} of in-memory"
                 + (f", {r['x_llama']:.2f}x llama.cpp" if "x_llama" in r else "")
                 + f"; disk bound {r['disk_bound_tok_s']:.1f} tok/s")
    return (f"{head}{r['decode_tok_s']:8.2f}{r.get('p99_ms', float('nan')):9.0f}"
            f"{r['disk_mb_per_token']:8.0f}{r.get('hit_rate', float('nan')):6.2f}"
            f"{r['peak_bytes'] / 1e6:9.0f}{r['oom_kills']:4d}{extra}")


def print_budgets(report: dict) -> None:
    memory = report["in_memory"]
    print(f"image {report['image_bytes'] / 1e9:.2f} GB, expert block "
          f"{report['expert_bytes'] / 1e6:.2f} MB, disk {report['disk_mb_per_s']:.0f} MB/s "
          f"(direct reads of one block), prompt {report['prompt_tokens']}, decode "
          f"{report['decoded_tokens']}, {report['threads']} thread(s); in memory: "
          + ", ".join(f"{k} {v['decode_tok_s']:.2f} tok/s" for k, v in memory.items()))
    print(f"{'budget':>8}{'route':>7}{'engine':>11}{'tok/s':>8}{'p99 ms':>9}{'MB/tok':>8}"
          f"{'hits':>6}{'peak MB':>9}{'OOM':>4}  ratios")
    for row in report["rows"]:
        for routing in ROUTINGS:
            for name, r in row[routing].items():
                print(_line(row["percent"], routing, name, r))
