"""scripts/demo.sh --paged (scripts/demo_board.py): models/paged_moe on an
emulated board without the model in its address map. The image (routed
experts last) stays a file on this machine that the firmware reads through
semihosting, as a microcontroller reads external flash through its driver:
the image's start into RAM, the experts the router picks into an expert
cache of as many slots as the board's RAM holds beside the rest, the most
used experts of a routing profile (another prompt, run on this machine)
pinned. The board's greedy text must match transformers'."""
from __future__ import annotations

import argparse
import pathlib
import re
import subprocess

from demo_board import BIN, PAGED_CHECKPOINT, PROFILE_PROMPT, REPO, decode, reference_ids, step

PROFILE_TOKENS = 64


def tokenize(model_dir: pathlib.Path, text: str) -> list[int]:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(model_dir / "model_tokenizer.json")).encode(text).ids


def pinned_keys(model_dir: pathlib.Path, out: pathlib.Path, pins: int) -> list[int]:
    """The `pins` experts a greedy run of PROFILE_PROMPT on this machine
    routes to most (colibri-run --stats, colibri-plot's SRAM plan), as the
    expert cache's keys (layer * n_experts + expert)."""
    from colibri_tools.bench.plot import parse_stats, pin_setting, plan_sram

    ids = ",".join(map(str, tokenize(model_dir, PROFILE_PROMPT)))
    with open(out / "profile.txt", "w") as stats:
        step(f"3. routing profile: {PROFILE_PROMPT!r} and {PROFILE_TOKENS} tokens on this machine",
             [str(REPO / "build" / "host" / "colibri-run"), str(model_dir / "model.bin"),
              "--ids", ids, "--gen", str(PROFILE_TOKENS), "--stats"], stderr=stats,
             stdout=subprocess.DEVNULL)
    counts = parse_stats((out / "profile.txt").read_text()).counts
    setting = pin_setting(plan_sram(counts, pins))
    return [int(k) for k in setting.split(":") if k]


def board_run(board: str, elf: pathlib.Path, image: pathlib.Path, settings: list[str]) -> str:
    from colibri_tools.board.qemu import launch

    print(f"\n== 5. boot {board} in QEMU: nothing of the model in its address map; "
          f"the firmware reads {image.name} through semihosting\nsettings: "
          + " ".join(s if len(s) < 60 else s[:57] + "..." for s in settings), flush=True)
    with launch(board, elf, None, tcp=False, capture=True, timeout=1800, storage=image,
                settings=settings) as session:
        code = session.wait()
        output = session.output.decode(errors="replace")
    print(output, flush=True)
    if code != 0:
        raise SystemExit(f"the board exited with status {code}")
    return output


def summary(output: str, fit) -> None:
    """SRAM, bytes read per token, hit rate, instructions per decoded token."""
    tokens = [dict(re.findall(r"(\w+)=(\d+)", line)) for line in output.splitlines()
              if line.startswith("token ") and "acquires=" in line]
    n = max(len(tokens), 1)
    read = sum(int(t["bytes_read"]) for t in tokens) / n
    hits = sum(int(t["hits"]) for t in tokens)
    acquires = sum(int(t["acquires"]) for t in tokens)
    ticks = sum(int(t["ticks"]) for t in tokens) / n
    unit = re.search(r" tick=(.*)$", output, re.M)
    ram, paged = fit.ram, fit.paged
    experts = paged["blocks"] * paged["slot_bytes"]
    print("== the figures")
    print(f"RAM used: {ram['total']:,} of {ram['size']:,} bytes; of it the image's start "
          f"{paged['resident']:,} and the expert cache {ram['expert_cache']:,} "
          f"({paged['slots']} of {paged['blocks']} expert blocks: the experts are "
          f"{experts / ram['size']:.1f}x the RAM)")
    print(f"per decoded token ({len(tokens)}): {read:,.0f} bytes read from storage, "
          f"hit rate {100 * hits / max(acquires, 1):.1f} % ({hits} of {acquires}), "
          f"{ticks:,.0f} ticks (tick = {unit[1] if unit else '?'})")


def paged_demo(args: argparse.Namespace) -> int:
    from colibri_tools.board.boards import load
    from colibri_tools.board.fit import load_model, plan

    board = args.board or "qemu_an547"
    out = REPO / "out" / "demo_board" / f"{board}-paged"
    model_dir = out / "model"
    step("1. convert the trained checkpoint, its routed experts last",
         [str(BIN / "colibri-convert"), str(PAGED_CHECKPOINT), "-o", str(model_dir), "--quiet",
          "--experts-last"])
    step(f"2. what {board} can hold: the image's start and an expert cache",
         [str(BIN / "colibri-board"), "fit", board, str(model_dir), "--app", "paged_moe"])
    fit = plan(load(board), load_model(model_dir), app="paged_moe")
    slots = args.slots or fit.paged["slots"]
    pins = [] if slots <= 2 else pinned_keys(model_dir, out, args.pins if args.pins is not None
                                               else slots // 2)
    step(f"4. build paged_moe for {board}",
         ["make", "-s", "firmware", f"BOARD={board}", "APP=paged_moe",
          f"MODEL_DIR={model_dir.relative_to(REPO)}"])
    prompt_ids = tokenize(model_dir, args.prompt)
    settings = [f"slots={slots}", f"gen={args.gen}", "logits=0", f"verify={int(not args.no_verify)}",
                "ids=" + ":".join(map(str, prompt_ids))] + \
        ([f"pin={':'.join(map(str, pins))}"] if pins else [])
    output = board_run(board, REPO / "build" / "fw" / board / "paged_moe" / "firmware.elf",
                       model_dir / "model.bin", settings)
    got_ids = [int(i) for i in re.findall(r"^token \d+ id=(\d+)", output, re.M)]
    want_ids = reference_ids(prompt_ids, args.gen, PAGED_CHECKPOINT)
    print("== 6. the board's tokens, and the same continuation from transformers")
    print(repr(args.prompt + decode(model_dir, got_ids)))
    print(repr(args.prompt + decode(model_dir, want_ids)))
    summary(output, fit)
    print("MATCH" if got_ids == want_ids else "MISMATCH")
    return 0 if got_ids == want_ids else 1
