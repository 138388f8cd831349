"""The same protocol on emulated boards: the bare-metal serial_runner sample
(samples/baremetal/serial_runner) built for QEMU's virt Cortex-A72 and
mps3-an547 Cortex-M55 and mps2-an500 Cortex-M7, driven over QEMU's TCP serial port by the same client,
must pass the golden suite and give logits bit-identical to the Linux build
of the same core (cross-target equality through the logits digests)."""
from __future__ import annotations

import shutil
import subprocess

import pytest
from colibri_tools.protocol import SerialClient
from colibri_tools.testing.golden import load_suite
from colibri_tools.testing.suite_runner import digests, run_suite
from serial_helpers import REPO

BOARDS = {"qemu_virt_a72": ("qemu-system-aarch64", "aarch64-linux-gnu-gcc"),
          "qemu_an547": ("qemu-system-arm", "arm-none-eabi-gcc"),
          "qemu_an500": ("qemu-system-arm", "arm-none-eabi-gcc")}


@pytest.fixture(scope="module")
def linux_digests(runner, suite_file) -> dict[str, str]:
    with SerialClient.open(runner.url, timeout=10) as client:
        report = run_suite(client, load_suite(suite_file))
    assert report.passed
    return digests(report)


def _firmware(board: str, model_dir, build_dir):
    if not (REPO / "samples" / "baremetal" / "serial_runner" / "main.c").exists():
        pytest.skip("samples/baremetal/serial_runner is not there yet")
    done = subprocess.run(["make", "-s", "firmware", f"BUILD={build_dir}", f"BOARD={board}",
                           "APP=serial_runner", f"MODEL_DIR={model_dir}"], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return build_dir / "fw" / board / "serial_runner" / "firmware.elf"


@pytest.mark.parametrize("board", list(BOARDS))
def test_board_passes_and_matches_linux_bit_for_bit(board, tiny, suite_file, linux_digests,
                                                    tmp_path):
    for tool in BOARDS[board]:
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed")
    from colibri_tools.board.qemu import launch

    elf = _firmware(board, tiny["image"].parent, tmp_path / "build")
    suite = load_suite(suite_file)
    with launch(board, elf, tiny["image"], timeout=120) as session:
        with SerialClient.from_port(session.open_serial(), session.url, timeout=30) as client:
            report = run_suite(client, suite)
            assert report.passed, [c.messages for c in report.cases]
            assert report.info.board == board
            client.reset()
            plain = client.forward([7, 8, 9])
            client.reset()
            in_isr = client.forward([7, 8, 9], in_interrupt=True)
            assert client.command("reset") == ["ok: position 0"]
    assert digests(report) == linux_digests
    assert in_isr.ran_in_interrupt and in_isr.logits_crc == plain.logits_crc
    assert in_isr.isr_stack_bytes > 0
