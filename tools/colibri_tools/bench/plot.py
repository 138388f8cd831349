"""colibri-plot: pictures of a run, as PNG (matplotlib: pip install colibri-tools[plot]).

    colibri-run model.bin --ids ... --gen 200 --stats 2> run.txt     (or colibri-generate --stats)
    colibri-plot experts run.txt -o experts.png [--image model.bin --sram-bytes 1048576 | --sram-experts N]
    colibri-plot latency run.txt -o latency.png
    colibri-run model.bin ... --memory-budget 1G --stats 2> run.txt && colibri-plot cache run.txt -o cache.png
    colibri-plot budget run.txt --image model.bin --disk-mbps 600 -o budget.png [--percents 100,50,25]
    colibri-bench ... --json bench.json && colibri-plot roofline bench.json -o roofline.png

experts: a heat map of expert use per layer (each cell: the share of that
layer's routed tokens the expert took), from the `experts:` lines of --stats.
With an SRAM budget it also plans which expert blocks belong in fast memory:
the most used blocks, over all layers, as many as fit (--sram-bytes with the
image, which gives each block's size, or --sram-experts), outlined on the map
and listed, with the share of expert reads they would serve, and as the keys
to pin in the core's expert cache (pin=...); the rest can stay in QSPI or
external flash.
latency: the histogram of decode-step times (`token_ns:` of --stats) with the
median, 90th and 99th percentiles.
roofline: each engine's decode speed beside the speed the memory bandwidth
allows (read GB/s / bytes read per decoded token), from colibri-bench's JSON.
cache: a --memory-budget run's expert cache over its decoded tokens: the
token's latency and the part of it spent waiting for reads, the megabytes
read and the hit rate (`token_stall_ns:`, `token_read_bytes:`,
`token_expert_hits:`).
budget: the planner (budget_plan.py): from an in-memory run's routing profile
and speed, the image's sizes and a disk bandwidth, the hit rate and decode
speed each budget will give; printed as a table and drawn.

Library first: parse_stats(), plan_sram(), experts_figure(), latency_figure(),
roofline_figure() (each returns a matplotlib Figure); main() is the CLI.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import ColibriError, OptionError
from ..version import add_version_option
from .plot_common import PlotError, _pyplot

PROG = "colibri-plot"


@dataclass
class RunStats:
    """What a --stats text holds for the pictures."""

    counts: np.ndarray | None = None  # [layers, experts]; rows of dense layers are zero
    zero: np.ndarray | None = None  # [layers] choices of zero-computation experts (format 1.12)
    layers: list[int] = field(default_factory=list)  # layers that had an experts: line
    token_ns: list[int] = field(default_factory=list)
    token_stall_ns: list[int] = field(default_factory=list)
    token_read_bytes: list[int] = field(default_factory=list)
    token_expert_hits: list[int] = field(default_factory=list)
    fields: dict[str, dict[str, str]] = field(default_factory=dict)  # other lines: key=value


_LISTS = ("token_ns", "token_stall_ns", "token_read_bytes", "token_expert_hits")


def _fields(text: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in text.split() if "=" in part)


def parse_stats(text: str, source: str = "<stats>") -> RunStats:
    """The experts: and token_ns: lines of colibri-run / colibri-generate --stats."""
    rows: dict[int, list[int]] = {}
    zeros: dict[int, int] = {}
    stats = RunStats()
    for number, line in enumerate(text.splitlines(), 1):
        head, _, rest = line.partition(": ")
        topic, _, body = rest.partition(": ")
        if not head.startswith("colibri-"):
            continue
        if topic not in ("experts", *_LISTS):
            stats.fields[topic] = _fields(body)
            continue
        try:
            if topic in _LISTS:
                getattr(stats, topic).extend(int(v) for v in body.split(",") if v)
            else:
                f = _fields(body)
                rows[int(f["layer"])] = [int(v) for v in f["counts"].split(",")]
                if "zero" in f:
                    zeros[int(f["layer"])] = int(f["zero"])
        except (KeyError, ValueError) as exc:
            raise PlotError(f"line {number}: not a --stats {topic} line ({exc}): {line[:120]!r}",
                            path=source) from None
    if rows:
        widths = {len(r) for r in rows.values()}
        if len(widths) != 1:
            raise PlotError("experts lines have different expert counts", path=source)
        stats.counts = np.zeros((max(rows) + 1, widths.pop()), np.int64)
        for layer, row in rows.items():
            stats.counts[layer] = row
        stats.layers = sorted(rows)
        if zeros:
            stats.zero = np.zeros(len(stats.counts), np.int64)
            stats.zero[list(zeros)] = list(zeros.values())
    return stats


def expert_block_bytes(image_path: str | Path) -> int:
    """Bytes of one expert's block (gate, up, down) in a model image (the largest)."""
    from ..image.image_reader import read_image
    from ..image.image_spec import NO_EXPERT

    blocks: dict[tuple[int, int], int] = {}
    for t in read_image(image_path).tensors:
        if t.expert != NO_EXPERT:
            blocks[(t.layer, t.expert)] = blocks.get((t.layer, t.expert), 0) + t.size
    if not blocks:
        raise PlotError("the image has no routed experts", path=image_path)
    return max(blocks.values())


def plan_sram(counts: np.ndarray, slots: int) -> np.ndarray:
    """A mask of the `slots` most used (layer, expert) blocks (ties: lower layer,
    then lower expert, first); unused blocks are never chosen."""
    mask = np.zeros(counts.shape, bool)
    order = sorted(((-int(c), layer, e) for (layer, e), c in np.ndenumerate(counts) if c > 0))
    for _, layer, e in order[:max(slots, 0)]:
        mask[layer, e] = True
    return mask


def experts_figure(stats: RunStats, sram: np.ndarray | None = None, title: str = ""):
    plt = _pyplot()
    counts = stats.counts
    if counts is None:
        raise PlotError("no experts: lines (run colibri-run or colibri-generate with --stats)")
    layers = stats.layers
    shown = counts[layers]
    labels = [str(e) for e in range(counts.shape[1])]
    if stats.zero is not None:  # the zero-computation experts' choices, a column apart
        shown = np.concatenate([shown, stats.zero[layers, None]], axis=1)
        labels.append("zero")
    share = shown / np.maximum(shown.sum(axis=1, keepdims=True), 1)
    fig, ax = plt.subplots(figsize=(max(6.4, 0.45 * shown.shape[1] + 3),
                                    max(3.5, 0.35 * len(layers) + 2)))
    image = ax.imshow(100 * share, cmap="viridis", aspect="auto", vmin=0)
    fig.colorbar(image, ax=ax, label="% of the layer's routed tokens")
    ax.set_xlabel("expert")
    ax.set_ylabel("layer")
    ax.set_xticks(range(shown.shape[1]), labels)
    ax.set_yticks(range(len(layers)), [str(layer) for layer in layers])
    if shown.shape[1] <= 17 and len(layers) <= 32:
        for (row, e), value in np.ndenumerate(share):
            ax.text(e, row, f"{100 * value:.0f}", ha="center", va="center", fontsize=7,
                    color="white" if value < share.max() / 2 else "black")
    heading = title or "expert use per layer"
    if sram is not None:
        import matplotlib.patches as patches

        for (row, e), chosen in np.ndenumerate(sram[layers]):
            if chosen:
                ax.add_patch(patches.Rectangle((e - 0.5, row - 0.5), 1, 1, fill=False,
                                               edgecolor="red", linewidth=2))
        served = counts[sram].sum() / max(counts.sum(), 1)
        heading += (f"\nred: the {int(sram.sum())} of {len(layers) * counts.shape[1]} blocks "
                    f"for SRAM, {100 * served:.1f}% of expert reads")
    ax.set_title(heading, fontsize=10)
    fig.tight_layout()
    return fig


def latency_figure(token_ns: Sequence[int], title: str = ""):
    plt = _pyplot()
    if not token_ns:
        raise PlotError("no token_ns: line (a run with --stats and at least 2 generated tokens)")
    ms = np.asarray(token_ns, np.float64) / 1e6
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    ax.hist(ms, bins=min(50, max(10, len(ms) // 5)), color="steelblue")
    for q, style in ((50, "-"), (90, "--"), (99, ":")):
        value = float(np.percentile(ms, q))
        ax.axvline(value, color="black", linestyle=style, label=f"p{q} {value:.3f} ms")
    ax.set_xlabel("decode step (ms)")
    ax.set_ylabel("tokens")
    ax.legend()
    ax.set_title(title or f"per-token latency, {len(ms)} decode steps")
    fig.tight_layout()
    return fig


def roofline(report: dict) -> list[dict]:
    """Rows of a colibri-bench report with the decode speed the bandwidth allows."""
    per_token = report["bytes_per_decoded_token"]
    bandwidth = {str(k): v for k, v in report["read_gb_per_s"].items()}
    return [{"label": f"{r['engine']} x{r['threads']}", "decode": r["decode_tok_s"],
             "bound": bandwidth[str(r["threads"])] * 1e9 / per_token} for r in report["rows"]]


def roofline_figure(report: dict, title: str = ""):
    plt = _pyplot()
    rows = roofline(report)
    if not rows:
        raise PlotError("the benchmark report has no rows")
    fig, ax = plt.subplots(figsize=(max(5.0, 1.2 * len(rows) + 2), 4.0))
    x = np.arange(len(rows))
    ax.bar(x, [r["decode"] for r in rows], color="steelblue", label="decode tok/s (measured)")
    ax.hlines([r["bound"] for r in rows], x - 0.4, x + 0.4, colors="red", linewidth=2.5,
              zorder=3, label="bandwidth bound (read GB/s / bytes per token)")
    for i, r in enumerate(rows):
        ax.text(i, r["decode"], f"{100 * r['decode'] / r['bound']:.0f}%", ha="center",
                va="bottom")
    ax.set_xticks(x, [r["label"] for r in rows])
    ax.set_ylabel("tokens per second")
    ax.set_ylim(0, 1.35 * max(max(r["decode"], r["bound"]) for r in rows))
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title(title or f"decode vs the memory roofline "
                          f"({report['bytes_per_decoded_token'] / 1e6:.1f} MB per token)")
    fig.tight_layout()
    return fig


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise PlotError(f"cannot read: {exc.strerror or exc}", path=path) from exc


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="PNG pictures of a Colibri run: expert "
                                "use per layer, token latency, the bandwidth roofline.")
    add_version_option(p)
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("experts", help="heat map of expert use per layer (and an SRAM plan)")
    e.add_argument("stats", type=Path, help="--stats output of colibri-run or colibri-generate")
    e.add_argument("--image", type=Path, help="the model.bin (expert block sizes for --sram-bytes)")
    budget = e.add_mutually_exclusive_group()
    budget.add_argument("--sram-bytes", type=int, metavar="N", help="fast memory for expert blocks")
    budget.add_argument("--sram-experts", type=int, metavar="N", help="expert blocks that fit")
    lat = sub.add_parser("latency", help="histogram of decode-step times")
    lat.add_argument("stats", type=Path)
    roof = sub.add_parser("roofline", help="decode speed vs the bandwidth bound (colibri-bench)")
    roof.add_argument("report", type=Path, help="colibri-bench --json output")
    from .plot_budget import add_parsers

    for s in (e, lat, roof, *add_parsers(sub)):
        s.add_argument("-o", "--output", type=Path, required=True, help="PNG to write")
        s.add_argument("--title", default="")
    return p


def _experts(args: argparse.Namespace) -> str:
    stats = parse_stats(_read(args.stats), str(args.stats))
    if stats.counts is None:
        raise PlotError("no experts: lines (run colibri-run or colibri-generate with --stats)",
                        path=args.stats)
    slots, note = None, ""
    if args.sram_bytes is not None:
        if args.image is None:
            raise OptionError("--sram-bytes needs --image (the size of an expert block)")
        if args.sram_bytes < 0:
            raise OptionError("--sram-bytes must be >= 0")
        block = expert_block_bytes(args.image)
        slots = args.sram_bytes // block
        note = f" ({args.sram_bytes} bytes / {block} bytes per expert block)"
    elif args.sram_experts is not None:
        if args.sram_experts < 0:
            raise OptionError("--sram-experts must be >= 0")
        slots = args.sram_experts
    sram = plan_sram(stats.counts, slots) if slots is not None else None
    experts_figure(stats, sram, args.title).savefig(args.output, dpi=120)
    lines = [f"wrote {args.output}"]
    if stats.zero is not None:
        total = int(stats.counts.sum() + stats.zero.sum())
        lines.append(f"zero-computation experts: {int(stats.zero.sum())} of {total} choices "
                     f"({100 * stats.zero.sum() / max(total, 1):.1f}%: no weights read)")
    if sram is not None:
        lines.append(f"SRAM: {int(sram.sum())} expert blocks{note}, serving "
                     f"{100 * stats.counts[sram].sum() / max(stats.counts.sum(), 1):.1f}% of "
                     "expert reads")
        for layer in stats.layers:
            fast = np.flatnonzero(sram[layer]).tolist()
            slow = np.flatnonzero(~sram[layer]).tolist()
            lines.append(f"  layer {layer}: SRAM {fast or '-'}  QSPI {slow or '-'}")
        lines.append("pinned for the expert cache (layer * n_experts + expert; "
                     "samples/baremetal/paged_moe): pin=" + pin_setting(sram))
    return "\n".join(lines)


def pin_setting(sram: np.ndarray) -> str:
    """An SRAM plan as the expert cache's pinned keys, layer * n_experts +
    expert, ascending and joined by ':' (colibri_expert_cache_config.pinned)."""
    return ":".join(str(int(k)) for k in np.flatnonzero(sram.reshape(-1)))


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.cmd == "experts":
            print(_experts(args))
            return 0
        if args.cmd in ("cache", "budget"):
            from .plot_budget import run

            print(run(args, parse_stats(_read(args.stats), str(args.stats))))
            return 0
        if args.cmd == "latency":
            stats = parse_stats(_read(args.stats), str(args.stats))
            latency_figure(stats.token_ns, args.title).savefig(args.output, dpi=120)
        else:
            try:
                report = json.loads(_read(args.report))
                figure = roofline_figure(report, args.title)
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise PlotError(f"not a colibri-bench --json report: {exc!r}",
                                path=args.report) from None
            figure.savefig(args.output, dpi=120)
        print(f"wrote {args.output}")
    except OptionError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except ColibriError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"{PROG}: error: {args.output}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
