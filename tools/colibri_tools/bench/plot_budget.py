"""colibri-plot cache and colibri-plot budget (plot.py's module docstring):
the expert cache of a --memory-budget run over its tokens, and the planner's
prediction for budgets not yet run (budget_plan.py)."""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from ..errors import OptionError
from .budget_plan import Sizes, predict
from .plot_common import PlotError, _pyplot


def cache_figure(stats, title: str = ""):
    """Per decoded token: latency and read stall (ms), MB read, hit rate."""
    if not stats.token_stall_ns or len(stats.token_stall_ns) != len(stats.token_ns):
        raise PlotError("no token_stall_ns: line (a colibri-run --memory-budget run with "
                        "--stats and at least 2 generated tokens)")
    model = stats.fields.get("model", {})
    per_token = int(model.get("top_k", 0)) * max(len(stats.layers), 1)
    plt = _pyplot()
    x = np.arange(1, len(stats.token_ns) + 1)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7.0, 5.6), sharex=True)
    top.plot(x, np.asarray(stats.token_ns) / 1e6, label="token latency")
    top.fill_between(x, np.asarray(stats.token_stall_ns) / 1e6, color="tomato", alpha=0.6,
                     label="waiting for expert reads")
    top.set_ylabel("ms")
    top.legend(fontsize=8)
    bottom.bar(x, np.asarray(stats.token_read_bytes) / 1e6, color="steelblue", label="MB read")
    bottom.set_ylabel("MB read")
    bottom.set_xlabel("decoded token")
    if per_token and stats.token_expert_hits:
        rate = bottom.twinx()
        rate.plot(x, np.asarray(stats.token_expert_hits) / per_token, color="black",
                  label="hit rate")
        rate.set_ylim(0, 1)
        rate.set_ylabel("hit rate")
    cache = stats.fields.get("expert_cache", {})
    top.set_title(title or f"expert cache: {cache.get('slots', '?')} slots, policy "
                  f"{cache.get('policy', '?')}", fontsize=10)
    fig.tight_layout()
    return fig


def _sizes(stats, image: Path) -> Sizes:
    from ..image.image_reader import read_image

    img = read_image(image)
    blocks = img.expert_blocks()
    if not blocks:
        raise OptionError(f"{image}: the image has no routed experts")
    memory, model = stats.fields.get("memory", {}), stats.fields.get("model", {})
    if not memory or not model:
        raise OptionError("the stats have no model: and memory: lines (colibri-run --stats)")
    held = int(memory["state_bytes"]) + int(memory["scratch_bytes"]) + 4 * int(model["vocab"])
    return Sizes(dense_bytes=img.image_size - sum(b.size for b in blocks),
                 block_bytes=max(b.size for b in blocks), held_bytes=held,
                 moe_layers=len({b.layer for b in blocks}), experts=img.record.n_experts,
                 top_k=img.record.top_k)


def budget_rows(stats, image: Path, percents: list[float], disk_mbps: float) -> list[dict]:
    if stats.counts is None:
        raise OptionError("the stats have no experts: lines (a routing profile)")
    decode = stats.fields.get("decode", {})
    if "tokens_per_s" not in decode or float(decode["tokens_per_s"]) <= 0:
        raise OptionError("the stats have no decode speed (a run with --gen 2 or more)")
    sizes = _sizes(stats, image)
    size = image.stat().st_size
    rows = predict(stats.counts, sizes, [int(size * p / 100) for p in percents],
                   disk_mbps * 1e6, 1 / float(decode["tokens_per_s"]))
    for row, p in zip(rows, percents):
        row["percent"] = p
    return rows


def budget_figure(rows: list[dict], title: str = ""):
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    x = [r["percent"] for r in rows]
    ax.fill_between(x, [r["tok_s_low"] for r in rows], [r["tok_s_high"] for r in rows],
                    color="steelblue", alpha=0.5, label="decode tok/s (reads serial .. overlapped)")
    ax.set_xlabel("memory budget (% of the image)")
    ax.set_ylabel("tokens per second")
    rate = ax.twinx()
    rate.plot(x, [r["hit_rate"] for r in rows], color="black", marker="o", label="hit rate")
    rate.set_ylim(0, 1)
    rate.set_ylabel("expert cache hit rate")
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title(title or "predicted from the routing profile", fontsize=10)
    fig.tight_layout()
    return fig


def add_parsers(sub) -> list[argparse.ArgumentParser]:
    cache = sub.add_parser("cache", help="a --memory-budget run's expert cache, token by token")
    cache.add_argument("stats", type=Path)
    plan = sub.add_parser("budget", help="predicted hit rate and speed at memory budgets")
    plan.add_argument("stats", type=Path, help="--stats of an in-memory run (profile and speed)")
    plan.add_argument("--image", type=Path, required=True, help="the model.bin")
    plan.add_argument("--disk-mbps", type=float, required=True,
                      help="the disk's read bandwidth in MB/s (colibri-bench --budgets prints it)")
    plan.add_argument("--percents", default="100,50,25,12.5",
                      help="budgets in percent of the image (default 100,50,25,12.5)")
    return [cache, plan]


def run(args, stats) -> str:
    """The cache or budget subcommand: write the PNG, return what to print."""
    if args.cmd == "cache":
        cache_figure(stats, args.title).savefig(args.output, dpi=120)
        return f"wrote {args.output}"
    try:
        percents = [float(p) for p in args.percents.split(",")]
    except ValueError:
        raise OptionError(f"--percents {args.percents!r} is not a list of numbers") from None
    if not percents or min(percents) <= 0 or args.disk_mbps <= 0:
        raise OptionError("--percents above 0 and --disk-mbps above 0")
    rows = budget_rows(stats, args.image, sorted(percents), args.disk_mbps)
    budget_figure(rows, args.title).savefig(args.output, dpi=120)
    lines = [f"wrote {args.output}", f"{'budget':>8}{'slots':>7}{'hits':>10}{'MB/token':>10}"
             f"{'tok/s':>18}"]
    for r in rows:
        speed = (f"{r['tok_s_low']:.2f} .. {r['tok_s_high']:.2f}" if r["slots"]
                 else "below minimum")
        hits = (f"{r['hit_rate']:.2f}" if r["hit_rate_low"] == r["hit_rate"]
                else f"{r['hit_rate_low']:.2f}-{r['hit_rate']:.2f}")
        lines.append(f"{r['percent']:7g}%{r['slots']:7d}{hits:>10}"
                     f"{r['read_mb_per_token']:10.1f}  {speed:>16}")
    return "\n".join(lines)
