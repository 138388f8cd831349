"""Zephyr's own test runner over the module's ztest suite and samples, on the
boards their yaml files allow: run on native_sim/native/64 (host toolchain),
mps3/corstone300/an547 (Cortex-M55) and mps2/an385 (soft-float Cortex-M3) in
QEMU, built only for the two STM32H7 boards (gnuarmemb). Every configuration
must pass, on every board that runs it the ztest suite must find the logits
bit-identical to the Linux build, and the size table of docs/zephyr.md must
be what these builds' linker memory reports say. The runs (zephyr_helpers.twister)
are made once per session: the other Zephyr tests take their builds of the
samples and the suite on AN547 and native_sim (conftest.zephyr_build).

`--disable-warnings-as-errors`: the pruned Zephyr 4.3 copy this runs against in
CI has a warning in kernel/sched.c under -Werror (not in Colibri's sources,
which CONFIG_COLIBRI_WARNINGS_AS_ERRORS keeps at -Werror).
"""
from __future__ import annotations

import re

import pytest
from zephyr_helpers import (
    AN385,
    AN547,
    NATIVE_SIM,
    REPO,
    TWISTER_BUILD_ONLY,
    TWISTER_RUNS,
    memory_report,
    missing_for_board,
)

EMULATED = {NATIVE_SIM, AN547, AN385}
SAMPLES = ["hello_moe", "isr_forward", "serial_runner"]
DOC = REPO / "docs" / "zephyr.md"


@pytest.mark.parametrize("name", list(TWISTER_RUNS))
def test_twister(zephyr, need_qemu, name, twister_run, twister_summary):
    platforms = TWISTER_RUNS[name]
    for board in platforms:
        reason = missing_for_board(zephyr, board)
        if reason:
            pytest.skip(reason)
    run = twister_run(name)
    assert run.returncode == 0, f"twister failed:\n{run.log[-8000:]}"
    outdir, log = run.outdir, run.log
    suites = run.report()["testsuites"]
    ran = [s for s in suites if s["status"] != "filtered"]
    assert {s["platform"] for s in ran} == set(platforms), "a board ran nothing"
    want = {b: ("passed" if b in EMULATED else "not run") for b in platforms}
    bad = [(s["platform"], s["name"], s["status"], s.get("reason")) for s in ran
           if s["status"] != ("not run" if s["name"] in TWISTER_BUILD_ONLY else want[s["platform"]])]
    assert bad == [], bad
    _check_size_table(outdir, [b for b in platforms if b != NATIVE_SIM])
    for board in [b for b in platforms if b in EMULATED]:
        core = next(s for s in ran if s["platform"] == board and s["name"].endswith("colibri.core"))
        assert len(core["testcases"]) >= 11 and all(c["status"] == "passed" for c in core["testcases"])
        handler = next((outdir / board.replace("/", "_")).glob("**/colibri.core/handler.log"))
        assert re.search(r"^logits: 0 of \d+ differ", handler.read_text(), re.M), \
            f"{board}: logits not bit-identical to the Linux build ({handler})"
    for line in re.findall(r"INFO\s+-\s+(\d+ of \d+ executed test (?:configurations|cases).*)", log):
        twister_summary.append(f"twister {' '.join(platforms)}: {line}")


def _doc_sizes() -> dict[str, list[tuple[int, int] | None]]:
    """board -> [(FLASH, RAM), or None for a sample not built there] per
    sample, from the table in docs/zephyr.md section 7."""
    cell = r"\s*((\d+) / (\d+) B|-)\s*"
    rows = {}
    for m in re.finditer(rf"^\| `([^`]+)`[^|]*\|{cell}\|{cell}\|{cell}\|$", DOC.read_text(), re.M):
        groups = m.groups()[1:]
        rows[m.group(1)] = [None if groups[i] == "-" else (int(groups[i + 1]), int(groups[i + 2]))
                            for i in range(0, 9, 3)]
    return rows


def _built_here(sample: str, board: str) -> bool:
    """Twister builds isr_forward and serial_runner for the AN547 only (their
    sample.yaml): on the other boards hello_moe is built (and on the STM32H7
    boards serial_runner with slots by test_zephyr_slots)."""
    return sample == "hello_moe" or board == AN547


def _check_size_table(outdir, boards: list[str]) -> None:
    doc, built, fresh = _doc_sizes(), {}, []
    for board in boards:
        sizes = []
        for sample in SAMPLES:
            if not _built_here(sample, board):
                sizes.append(None)
                continue
            log = next((outdir / board.replace("/", "_")).glob(f"**/sample.colibri.{sample}/build.log"))
            regions = memory_report(log.read_text())
            sizes.append((regions["FLASH"][0], regions["RAM"][0]))
        built[board] = sizes
        fresh.append(f"| `{board}` | " + " | ".join(f"{s[0]} / {s[1]} B" if s else "-"
                                                     for s in sizes) + " |")
    stale = {b: (doc.get(b), built[b]) for b in boards if doc.get(b) != built[b]}
    assert not stale, ("docs/zephyr.md section 7 disagrees with the build; the built figures:\n"
                       + "\n".join(fresh))
