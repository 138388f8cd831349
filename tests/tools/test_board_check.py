"""Wrong-board artefacts are refused (issue 12): a firmware for another CPU
or memory map in colibri-image --merge, colibri-flash and QEMU launches, an
x86-64 colibri-run for the AArch64 rpi4; and a firmware that stops on a fault
is explained in words."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from colibri_tools.board import qemu
from colibri_tools.board.board_check import BoardMismatch, check_firmware, explain_exit, read_elf
from colibri_tools.board.boards import load
from colibri_tools.board.hex_image import main as image_main
from fw_helpers import REPO, demo_model, firmware

BIN = REPO / ".venv" / "bin"


@pytest.fixture(scope="module")
def an547_elf() -> Path:
    return firmware("qemu_an547")


def test_merge_refuses_a_firmware_for_another_cpu(an547_elf, tmp_path, capsys):
    """The issue's case: an AN547 (Cortex-M55) firmware merged into a HEX for
    the STM32H747I-DISCO (Cortex-M7) was accepted with rc 0."""
    rc = image_main([str(demo_model() / "model.bin"), "--board", "stm32h747i_disco",
                     "--merge", str(an547_elf), "-o", str(tmp_path / "merged.hex"), "-q"])
    assert rc == 1
    assert "built for cortex-m55" in capsys.readouterr().err
    assert not (tmp_path / "merged.hex").exists()


def test_a_firmware_linked_for_another_memory_map_is_refused(an547_elf, tmp_path):
    text = (REPO / "boards" / "qemu_an547.toml").read_text()
    moved = text.replace('name = "qemu_an547"', 'name = "moved"').replace(
        "[memory.code]\norigin = 0x00000000", "[memory.code]\norigin = 0x10000000")
    assert moved != text
    (tmp_path / "moved.toml").write_text(moved)
    with pytest.raises(BoardMismatch, match="entry point 0x0.* outside board moved's code region"):
        check_firmware(load(tmp_path / "moved.toml"), an547_elf)
    ram = text.replace('name = "qemu_an547"', 'name = "ram"').replace(
        "[memory.ram]\norigin = 0x21000000", "[memory.ram]\norigin = 0x20000000")
    (tmp_path / "ram.toml").write_text(ram)
    with pytest.raises(BoardMismatch, match="runs at 0x210.*outside board ram's memory"):
        check_firmware(load(tmp_path / "ram.toml"), an547_elf)
    check_firmware(load("qemu_an547"), an547_elf)          # its own board: accepted


def test_flash_refuses_wrong_machines(an547_elf, tmp_path):
    host_run = REPO / "build" / "host" / "colibri-run"
    subprocess.run(["make", "-s", "build/host/colibri-run"], cwd=REPO, check=True, timeout=300)
    for board, fw, words in (
            ("rpi4", host_run, "ELF64 for x86-64, but board rpi4 is aarch64"),
            ("qemu_an500", an547_elf, "built for cortex-m55"),
            ("qemu_virt_a72", an547_elf, "ELF32 for ARM (32-bit), but board qemu_virt_a72")):
        done = subprocess.run([str(BIN / "colibri-flash"), "--board", board, "--firmware",
                               str(fw), "--weights", str(demo_model() / "model.bin"),
                               "--host", "pi@example.invalid", "--dry-run"],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 1 and words in done.stderr, (board, done.stderr)


def test_elf_reader_reads_cpu_and_symbols(an547_elf):
    info = read_elf(an547_elf)
    assert (info.machine, info.bits, info.cpu_name) == (40, 32, "cortex-m55")
    names = {name for _, _, name in info.symbols}
    assert {"Reset_Handler", "main", "colibri_forward"} <= names
    assert read_elf(REPO / "boards" / "rpi4.toml") is None


@pytest.mark.skipif(shutil.which("qemu-system-arm") is None, reason="qemu-system-arm not installed")
def test_the_an547_firmware_on_the_an500_is_explained(an547_elf):
    """Booted anyway (check=False), the AN547 firmware faults on the AN500; the
    run says which fault and where, and why it likely happened."""
    run = qemu.run("qemu_an500", an547_elf, demo_model() / "model.bin", timeout=60, check=False)
    assert run.returncode != 0
    assert run.fault is not None
    assert "locked up" in run.fault or "fault" in run.fault.lower()
    assert "at pc 0x" in run.fault and "+ 0x" in run.fault          # symbolized
    assert "built for cortex-m55" in run.fault


def test_fault_lines_are_decoded():
    board = load("qemu_an547")
    line = ("FAULT exception=0x00000003 cfsr=0x00010000 hfsr=0x40000000 mmfar=0x00000000 "
            "bfar=0x00000000 pc=0x00001234 lr=0x00000101 exc_return=0xfffffffd")
    text = explain_exit(board, 250, "hello\n" + line + "\n")
    assert text.startswith("HardFault (escalated from a configurable fault: HFSR.FORCED)")
    assert "undefined instruction" in text and "pc 0x00001234" in text
    bus = ("FAULT exception=0x00000005 cfsr=0x00008200 hfsr=0x00000000 mmfar=0x00000000 "
           "bfar=0x59303000 pc=0x00000010 lr=0x00000001 exc_return=0xfffffffd")
    text = explain_exit(board, 250, bus)
    assert "BusFault: precise bus error" in text and "0x59303000 (BFAR)" in text
    assert "did not reach the console" in explain_exit(board, 250, "", "")
    assert explain_exit(board, 0, line) is None and explain_exit(board, 1, "") is None
    a72 = load("qemu_virt_a72")
    report = ("colibri: fault: synchronous exception from EL1 thread (SP_EL0): data abort\r\n"
              "  ESR_EL1 0x0000000096000010 ELR_EL1 0x0000000040001000 FAR_EL1 0x0")
    assert explain_exit(a72, 3, report).startswith("synchronous exception from EL1 thread")
    assert explain_exit(a72, 3, "isr_forward: logits differ") is None


def test_elf_reader_survives_damaged_files(an547_elf):
    """One parser for every ELF the tools read (colibri_tools/board/elf.py): flipped
    bytes, truncations and absurd offsets give an ElfError or a result, never
    struct.error, IndexError or a hang."""
    import random

    from colibri_tools.board.elf import ElfError, parse_elf

    data = an547_elf.read_bytes()
    rng = random.Random(12)
    header_fields = list(range(16, 64))
    for trial in range(400):
        bad = bytearray(data[:rng.choice([len(data), 64, 200, len(data) // 2])])
        for _ in range(rng.randrange(1, 6)):
            at = rng.choice(header_fields) if trial % 2 else rng.randrange(len(bad))
            if at < len(bad):
                bad[at] = rng.randrange(256)
        try:
            parse_elf(bytes(bad), "fuzzed.elf")
        except ElfError as exc:
            assert "fuzzed.elf" in str(exc)
