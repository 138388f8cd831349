"""What colibri-bench's runs share (bench.py, bench_lowbit.py): the engine
timed as colibri-run would run it, and the CPU named for the report."""

from __future__ import annotations

import pathlib


def time_colibri(image: pathlib.Path, ids: list[int], gen: int, threads: int,
                 kernels: str | None = None) -> dict:
    """The engine in this process (colibri_tools.runtime.engine), set up as colibri-run
    --preload --batch PROMPT would be: the prompt in one forward call, then
    gen decode steps, each timed around its forward call, after one
    untimed warm-up of the prompt and a decode step (llama-bench warms up
    the same way: first touches of the scratch and KV pages and the
    threads' start stay out of both). kernels: a table name (None: the best
    this CPU runs)."""
    from ..runtime.engine import Engine

    with Engine(image, threads=threads, batch=min(len(ids), 256), preload=True,
                context=len(ids) + gen + 1, kernels=kernels) as engine:
        engine.timed_greedy(ids, 2)
        tokens, prompt_ns, steps = engine.timed_greedy(ids, gen + 1)
        scratch, table = engine.scratch_bytes, engine.kernels
    return {"prompt_tok_s": len(ids) * 1e9 / prompt_ns,
            "decode_tok_s": len(steps) * 1e9 / max(sum(steps), 1),
            "scratch_bytes": scratch, "tokens": tokens, "kernels": table}


def cpu_description() -> str:
    """The CPU's model name and the vector extensions the kernel tables use
    (Linux /proc/cpuinfo; "unknown CPU" elsewhere)."""
    try:
        text = pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown CPU"
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    name = fields.get("model name") or fields.get("CPU part") or "unknown CPU"
    flags = set((fields.get("flags") or fields.get("Features") or "").split())
    known = ("avx2", "fma", "avx_vnni", "avx512f", "avx512_vnni", "asimd", "asimddp")
    return f"{name} ({' '.join(f for f in known if f in flags) or 'no vector extensions listed'})"
