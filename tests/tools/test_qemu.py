"""The QEMU launcher boots emulated boards with the weights at the board's
address, reads them back before the CPU runs, refuses machines without memory
there, and never leaves a QEMU behind.

The firmware is built here (a few lines of C and assembly, with the cross
compilers) from the board file's own numbers, so these tests do not depend on
the port engineers' firmware: it prints "ok <image_size> <crc32>" of the bytes
it finds at the weight address, then exits with status 3 through semihosting.
The golden CRC is zlib's, over model.bin.
"""

from __future__ import annotations

import shutil
import subprocess
import tomllib
import zlib
from pathlib import Path

import pytest
from colibri_tools.board import qemu
from colibri_tools.board.boards import BOARDS_DIR, load
from colibri_tools.board.flash import main as flash_main
from colibri_tools.board.hex_image import build_hex
from colibri_tools.converter.convert import convert
from hf_models import build_model, save_checkpoint

EXIT_STATUS = 3

FIRMWARE_C = r"""
#include <stdint.h>
#define UART ((volatile uint32_t *)UART_BASE)
#define WEIGHTS ((const volatile uint8_t *)WEIGHTS_ADDR)
#if UART_PL011
static void put(char c) { while (UART[6] & (1u << 5)) { } UART[0] = (uint32_t)c; }
static void uart_init(void) { }
#else  /* CMSDK APB UART: DATA, STATE (bit 0 TX full), CTRL (bit 0 TX enable), BAUDDIV */
static void put(char c) { while (UART[1] & 1u) { } UART[0] = (uint32_t)c; }
static void uart_init(void) { UART[4] = 16u; UART[2] = 1u; }
#endif
static void hex32(uint32_t v) { for (int i = 28; i >= 0; i -= 4) put("0123456789abcdef"[(v >> i) & 15u]); }
int main(void);
int main(void)
{
    uart_init();
    uint32_t size = 0;
    for (int i = 0; i < 4; i++) size |= (uint32_t)WEIGHTS[16 + i] << (8 * i);
    uint32_t crc = 0xFFFFFFFFu;
    for (uint32_t i = 0; i < size && i < (1u << 24); i++) {
        crc ^= WEIGHTS[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    put('o'); put('k'); put(' '); hex32(size); put(' '); hex32(~crc); put('\n');
#ifdef SPIN
    for (;;) { }
#endif
    return EXIT_STATUS;
}
"""

START_AARCH64 = r"""
    .section .text.start, "ax"
    .global _start
_start:
    ldr x0, =stack_top
    mov sp, x0
    bl main
    sub sp, sp, #16
    mov x1, #0x26
    movk x1, #0x2, lsl #16          /* ADP_Stopped_ApplicationExit */
    str x1, [sp]
    str x0, [sp, #8]
    mov x1, sp
    mov w0, #0x18                   /* SYS_EXIT */
    hlt #0xf000
1:  b 1b
    .bss
    .align 4
    .space 8192
stack_top:
"""

START_CORTEX_M = r"""
    .syntax unified
    .thumb
    .section .vectors, "a"
    .word stack_top
    .word reset + 1
    .text
    .thumb_func
reset:
    bl main
    ldr r1, =0x20026                /* ADP_Stopped_ApplicationExit */
    push {r0}
    push {r1}
    mov r1, sp
    movs r0, #0x20                  /* SYS_EXIT_EXTENDED */
    bkpt 0xab
1:  b 1b
    .bss
    .align 3
    .space 4096
stack_top:
"""

LINK_CORTEX_M = """
MEMORY {{ CODE (rx) : ORIGIN = 0x{code:X}, LENGTH = 0x{code_len:X}
         RAM (rwx) : ORIGIN = 0x{ram:X}, LENGTH = 0x{ram_len:X} }}
SECTIONS {{
  .text : {{ KEEP(*(.vectors)) *(.text*) *(.rodata*) }} > CODE
  .bss (NOLOAD) : {{ *(.bss*) *(COMMON) }} > RAM
}}
"""


def board_toml(name: str, *, memory: str = "2G") -> str:
    return f"""
name = "{name}"
arch = "aarch64"
cpu = "cortex-a72"
port = "baremetal-aarch64"
cross_prefix = "aarch64-linux-gnu-"
cflags = ["-mcpu=cortex-a72"]
[memory.code]
origin = 0x40000000
length = 0x1000000
[memory.ram]
origin = 0x41000000
length = 0x1000000
[weights]
address = 0x90000000
size = 0x10000000
[uart]
kind = "pl011"
base = 0x09000000
[emulate]
qemu = "qemu-system-aarch64"
machine = "virt"
cpu = "cortex-a72"
memory = "{memory}"
[flash]
method = "qemu"
"""


def _raw(path: Path) -> dict:
    return tomllib.loads(path.read_text())


def emulated_boards() -> list[Path]:
    """Board files in boards/ that QEMU emulates as a machine."""
    return [p for p in sorted(BOARDS_DIR.glob("*.toml")) if "machine" in _raw(p).get("emulate", {})]


def build_firmware(board_file: Path, out: Path, *, spin: bool = False) -> Path:
    """A test firmware for the board, from its board file's numbers."""
    raw = _raw(board_file)
    gcc = raw["cross_prefix"] + "gcc"
    if shutil.which(gcc) is None:
        pytest.skip(f"{gcc} not installed (scripts/setup.sh installs the cross compilers)")
    uart = raw["uart"]
    defines = [f"-DUART_BASE=0x{uart['base']:X}u", f"-DWEIGHTS_ADDR=0x{raw['weights']['address']:X}u",
               f"-DUART_PL011={1 if uart['kind'] == 'pl011' else 0}", f"-DEXIT_STATUS={EXIT_STATUS}"]
    defines += ["-DSPIN"] if spin else []
    out.mkdir(parents=True, exist_ok=True)
    (out / "main.c").write_text(FIRMWARE_C)
    flags = [*raw["cflags"], "-std=c11", "-O1", "-fno-tree-vectorize", "-ffreestanding", "-nostdlib",
             "-static", "-Wl,--build-id=none", *defines]
    code, ram = raw["memory"]["code"], raw["memory"]["ram"]
    if raw["arch"] == "aarch64":
        (out / "start.S").write_text(START_AARCH64)
        # -N: no ELF headers in a loaded segment below the code region (the
        # launcher refuses bytes loaded outside it: board_check)
        flags += ["-mgeneral-regs-only", "-no-pie", "-Wl,-N", f"-Wl,-Ttext=0x{code['origin']:X}"]
    else:
        (out / "start.S").write_text(START_CORTEX_M)
        (out / "link.ld").write_text(LINK_CORTEX_M.format(
            code=code["origin"], code_len=code["length"], ram=ram["origin"], ram_len=ram["length"]))
        flags += ["-T", str(out / "link.ld")]
    elf = out / ("spin.elf" if spin else "firmware.elf")
    subprocess.run([gcc, *flags, str(out / "start.S"), str(out / "main.c"), "-o", str(elf)],
                   check=True, capture_output=True)
    return elf


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("qemu_model")
    hf, _ = build_model("qwen3_moe", seed=3)
    save_checkpoint(hf, d / "hf")
    return convert(d / "hf", d / "out", context=32, progress=False).image_path


@pytest.fixture
def virt(tmp_path) -> Path:
    path = tmp_path / "tvirt.toml"
    path.write_text(board_toml("tvirt"))
    return path


def need_qemu(board_file: Path) -> None:
    binary = _raw(board_file)["emulate"]["qemu"]
    if shutil.which(binary) is None:
        pytest.skip(f"{binary} not installed (apt-get install qemu-system-arm)")


def expected_line(model: Path) -> bytes:
    data = model.read_bytes()
    return f"ok {len(data):08x} {zlib.crc32(data):08x}\n".encode()


BOARDS = [pytest.param(p, id=p.stem) for p in emulated_boards()] + ["synthetic-virt"]


@pytest.fixture(params=BOARDS)
def board_file(request, virt) -> Path:
    return virt if request.param == "synthetic-virt" else request.param


def test_boot_with_raw_weights(board_file, model, tmp_path):
    need_qemu(board_file)
    elf = build_firmware(board_file, tmp_path / "fw")
    result = qemu.run(board_file, elf, model, timeout=60)
    assert result.output == expected_line(model), result.stderr
    assert result.returncode == EXIT_STATUS
    assert f"addr=0x{_raw(board_file)['weights']['address']:X},force-raw=on" in " ".join(result.argv)


def test_boot_with_weights_hex_through_the_generic_loader(board_file, model, tmp_path):
    # QEMU's generic loader reads Intel HEX itself (hw/core/generic-loader.c
    # falls back to load_targphys_hex_as when the file is not ELF/uImage).
    need_qemu(board_file)
    elf = build_firmware(board_file, tmp_path / "fw")
    weights = tmp_path / "weights.hex"
    build_hex(model, load(board_file), weights)
    result = qemu.run(board_file, elf, weights, timeout=60)
    assert result.output == expected_line(model), result.stderr
    assert f"loader,file={weights}" in result.argv


def test_serial_over_tcp_and_qemu_is_gone_afterwards(virt, model, tmp_path):
    need_qemu(virt)
    elf = build_firmware(virt, tmp_path / "fw")
    with qemu.launch(virt, elf, model, timeout=60) as session:
        assert session.url == f"socket://127.0.0.1:{session.port}"
        port = session.open_serial(timeout=20)
        line = port.readline()
        port.close()
        assert session.wait() == EXIT_STATUS
        process = session.process
    assert line == expected_line(model)
    assert process.poll() is not None


def test_close_kills_a_running_qemu(virt, model, tmp_path):
    need_qemu(virt)
    elf = build_firmware(virt, tmp_path / "fw", spin=True)
    with qemu.launch(virt, elf, model, timeout=60) as session:
        sock = session.connect()
        assert sock.makefile("rb").readline() == expected_line(model)
        process = session.process
        assert process.poll() is None
    assert process.poll() is not None
    sock.close()


def test_timeout_kills_qemu(virt, model, tmp_path):
    need_qemu(virt)
    elf = build_firmware(virt, tmp_path / "fw", spin=True)
    with pytest.raises(qemu.QemuError, match="did not finish within 1.5 s"):
        qemu.run(virt, elf, model, timeout=1.5)
    assert not qemu._LIVE


def test_weights_outside_machine_memory_are_refused_before_launch(tmp_path, model, monkeypatch):
    board = tmp_path / "small.toml"
    board.write_text(board_toml("small", memory="1G"))

    def no_launch(*args, **kwargs):
        raise AssertionError("QEMU must not be started")

    monkeypatch.setattr(qemu.subprocess, "Popen", no_launch)
    monkeypatch.setattr(qemu, "require_binary", lambda name: name)
    with pytest.raises(qemu.QemuError, match=r"silently load nothing there; set \[emulate\] "
                                             r"memory to at least \"2G\""):
        qemu.launch(board, model, model)


def test_readback_catches_weights_that_never_arrived(tmp_path, model, monkeypatch):
    # As if the machine were unknown to the static check: the QMP readback of
    # the weight region finds zeros where the model should be.
    board = tmp_path / "small.toml"
    board.write_text(board_toml("small", memory="1G"))
    need_qemu(board)
    elf = build_firmware(board, tmp_path / "fw")
    monkeypatch.setattr(qemu, "machine_memory", lambda emu: None)
    with pytest.raises(qemu.QemuError, match=r"did not arrive in small's emulated memory at "
                                             r"0x90000000.*byte at 0x90000000 is 0x00"):
        qemu.run(board, elf, model, timeout=30)
    assert not qemu._LIVE


def test_static_check_accepts_every_emulated_board():
    for path in emulated_boards():
        qemu.check_weight_region(load(path))


def test_argv_follows_the_board_file(virt, tmp_path):
    board = load(virt)
    odd = tmp_path / "a,b.bin"
    odd.write_bytes(b"x")
    (tmp_path / "fw.elf").write_bytes(b"\x7fELF")
    argv = qemu.qemu_argv(board, tmp_path / "fw.elf", odd, port=4321)
    assert argv[:7] == ["qemu-system-aarch64", "-M", "virt", "-cpu", "cortex-a72", "-m", "2G"]
    assert ["-monitor", "none"] == argv[argv.index("-monitor"):argv.index("-monitor") + 2]
    assert "tcp:127.0.0.1:4321,server=on,wait=on,nodelay=on" in argv
    assert f"loader,file={tmp_path}/a,,b.bin,addr=0x90000000,force-raw=on" in argv
    assert argv.count("-semihosting-config") == 1
    assert qemu.parse_size("512M") == 512 << 20 and qemu.parse_size("2G") == 2 << 30
    assert qemu.parse_size("1536") == 1536 << 20


def test_colibri_flash_qemu_backend_returns_the_firmware_status(virt, model, tmp_path, capfd):
    need_qemu(virt)
    elf = build_firmware(virt, tmp_path / "fw")
    status = flash_main(["--board", str(virt), "--weights", str(model), "--firmware", str(elf),
                         "--timeout", "60", "--work-dir", str(tmp_path / "work")])
    assert status == EXIT_STATUS
    assert expected_line(model).decode() in capfd.readouterr().out
