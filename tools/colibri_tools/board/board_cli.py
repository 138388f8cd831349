"""colibri-board: the board files (boards/*.toml, loaded by boards.py) as text,
linker script, make variables and C header, and `fit` (fit.py), the planner.

    colibri-board list
    colibri-board show BOARD
    colibri-board ld BOARD [-o FILE]        MEMORY block + symbols for the linker script
    colibri-board make BOARD                make variables (CC, CFLAGS, ...)
    colibri-board header BOARD [-o FILE]    board_config.h: addresses and limits as macros
    colibri-board fit BOARD MODEL_DIR|HF_DIR|config.json [--quant int8|int4]
"""
from __future__ import annotations

import argparse
import pathlib
import sys
from typing import Any

from ..errors import ColibriError
from ..version import add_version_option
from .boards import (
    Board,
    BoardError,
    board_dirs,
    board_names,
    config_header,
    linker_memory,
    load,
    make_vars,
    shown_path,
    write_generated,
)


def _size(n: int) -> str:
    """A region size as people say it: 512 KiB, 16 MiB, 2 GiB."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << (shift - 4)) == 0:
            value = n / (1 << shift)
            return f"{value:g} {unit}"
    return f"{n} B"


def list_text() -> str:
    """One line per board: arch, port, code, RAM and weight region sizes."""
    rows = [("board", "arch", "port", "code", "RAM", "weights", "at")]
    for name in board_names():
        b = load(name)
        at = "mapped file" if b.port == "linux" else f"0x{b.weights.origin:08X}"
        rows.append((name, b.arch, b.port, _size(b.code.length) if b.code else "-",
                     _size(b.ram.length) if b.ram else "-", _size(b.weights.length), at))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() + "\n" for r in rows)


def _value_text(key: str, value: Any) -> str:
    """Addresses in hex, other numbers in decimal, text quoted."""
    if isinstance(value, int) and not isinstance(value, bool) and \
            any(word in key for word in ("base", "address", "origin")):
        return f"0x{value:08X}"
    return f'"{value}"' if isinstance(value, str) else str(value)


def show_text(board: Board) -> str:
    """The loaded board, readable: regions as hex ranges with sizes, tables as key = value."""
    lines = [f"{board.name}: {board.description}", f"  file          {shown_path(board)}",
             f"  arch, cpu     {board.arch}, {board.cpu}", f"  port          {board.port}",
             f"  toolchain     {board.cross_prefix or '(host)'}gcc {' '.join(board.cflags)}"
             + (f" {' '.join(board.ldflags)}" if board.ldflags else ""),
             f"  kernels       {', '.join(board.kernels) or 'reference only'}"]
    for label, region in (("code", board.code), ("RAM", board.ram), ("weights", board.weights)):
        if region is None:
            continue
        where = (f"0x{region.origin:08X} .. 0x{region.end:08X}" if board.port != "linux"
                 else "(not an address: Linux maps the file)" if label == "weights" else "DRAM")
        lines.append(f"  {label:<13} {where}  {_size(region.length)} ({region.length} bytes)")
    lines.append(f"  alignment     {board.weights_alignment}")
    if board.bandwidth:
        lines.append(f"  bandwidth     {board.bandwidth / 1e6:,.0f} MB/s ({board.bandwidth_source})")
    elif board.bandwidth_source:
        lines.append(f"  bandwidth     none ({board.bandwidth_source})")
    if board.stacks:
        lines.append("  stacks        " + ", ".join(f"{k} {_size(v)}" for k, v in board.stacks.items()))
    for name in ("uart", "ticks", "emulate", "flash"):
        table = getattr(board, name)
        if table:
            lines.append(f"  [{name}]")
            lines += [f"    {key} = {_value_text(key, value)}" for key, value in table.items()]
    return "\n".join(lines) + "\n"


def _add_fit_parser(sub) -> None:
    f = sub.add_parser("fit", help="will a model fit this board? (image, RAM, context, speed)")
    f.add_argument("board", help="board name or .toml path")
    f.add_argument("model", help="converted MODEL_DIR (model.bin), Hugging Face folder or "
                   "cache root, or config.json")
    f.add_argument("--quant", choices=("int8", "int4"), help="size the experts as quantized")
    f.add_argument("--context", type=int, help="positions of KV state (default: the model's "
                   "converted context, else min(max positions, 2048))")
    f.add_argument("--batch", type=int, help="prompt chunk size the scratch is sized for")
    f.add_argument("--app", default="serial_runner", help="bare-metal sample whose RAM is "
                   "counted: serial_runner (default), hello_moe, isr_forward, paged_moe and "
                   "paged_runner (the routed experts paged from storage into an expert cache)")
    f.add_argument("--json", action="store_true", help="the report as JSON")
    f.add_argument("--cache-slots", action="store_true", help="print only the expert cache "
                   "slots a paging sample gets (0: not a paging sample, or none fit)")
    f.add_argument("--check", action="store_true", help="print nothing when it fits; when it "
                   "does not, one line saying why (for make and scripts)")


def _fit(args: argparse.Namespace) -> int:
    """0: fits, 1: does not fit, 2: cannot tell (bad board, model or option)."""
    from .fit import format_report, load_model, plan, refusal

    try:
        board = load(args.board)
        report = plan(board, load_model(args.model, quant=args.quant), context=args.context,
                      batch=args.batch, app=args.app)
    except ColibriError as exc:
        print(f"colibri-board fit: error: {exc}", file=sys.stderr)
        return 2
    if args.cache_slots:
        print(report.paged["slots"] if report.paged else 0)
    elif args.json:
        print(report.to_json())
    elif args.check:
        if not report.fits:
            print(f"colibri-board fit: {refusal(report)}", file=sys.stderr)
    else:
        print(format_report(report))
    return 0 if report.fits else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="colibri-board", description="Board data from boards/")
    add_version_option(p)
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="every board with its code, RAM and weight region sizes")
    for cmd in ("show", "ld", "make", "header"):
        s = sub.add_parser(cmd)
        s.add_argument("board")
        s.add_argument("-o", "--output", type=pathlib.Path)
    _add_fit_parser(sub)
    args = p.parse_args(argv)
    if args.cmd == "fit":
        return _fit(args)
    try:
        if args.cmd == "list":
            if not board_names():
                raise BoardError("no board files in " + ", ".join(map(str, board_dirs())) +
                                 " (a broken installation: the package ships its boards)")
            sys.stdout.write(list_text())
            return 0
        board = load(args.board)
        text = {"show": show_text, "ld": linker_memory, "make": make_vars,
                "header": config_header}[args.cmd](board)
        write_generated(text, args.output)
    except ColibriError as exc:
        print(f"colibri-board: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
