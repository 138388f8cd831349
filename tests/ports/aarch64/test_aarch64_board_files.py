"""The AArch64 board files: qemu_virt_a72 against the device tree QEMU itself
generates for the machine the board's [emulate] table names, the Linux boards'
conventions and flags, and the port's own checks (colibri_tools.board.port_aarch64)."""
from __future__ import annotations

import subprocess

import pytest
from aarch64_helpers import REPO, missing_tool_reason
from colibri_tools.board import boards, port_aarch64
from colibri_tools.board.qemu import NO_NETWORK
from fdt_read import find_compatible, read_dtb

LINUX_BOARDS = ["rpi4", "jetson_orin_nano"]
GIC_PPI_BASE, GIC_SPI_BASE = 16, 32
VIRTUAL_TIMER_SLOT = 2  # arm,armv8-timer interrupts: secure, non-secure, virtual, hypervisor


@pytest.fixture(scope="module")
def virt_tree(a72_board, tmp_path_factory):
    """QEMU's own device tree for the board's machine, CPU and RAM size."""
    emu = a72_board.emulate
    reason = missing_tool_reason(emu["qemu"])
    if reason:
        pytest.skip(reason)
    dtb = tmp_path_factory.mktemp("dtb") / "virt.dtb"
    done = subprocess.run(["timeout", "30", emu["qemu"], "-M", f"{emu['machine']},dumpdtb={dtb}",
                           "-cpu", emu["cpu"], "-m", emu["memory"], *NO_NETWORK,
                           "-display", "none"], capture_output=True, text=True)
    assert done.returncode == 0, f"QEMU could not dump its device tree: {done.stderr}"
    return read_dtb(dtb.read_bytes())


def _reg(node, index: int) -> tuple[int, int]:
    """(address, size) of the index-th reg entry (2 address + 2 size cells)."""
    c = node.cells("reg")[4 * index:4 * index + 4]
    return c[0] << 32 | c[1], c[2] << 32 | c[3]


def test_memory_regions_lie_in_qemu_ram(a72_board, virt_tree):
    ram_start, ram_size = _reg(virt_tree["/memory@40000000"], 0)
    for region in (a72_board.code, a72_board.ram, a72_board.weights):
        assert ram_start <= region.origin and region.end <= ram_start + ram_size, region


def test_uart_matches_qemu(a72_board, virt_tree):
    (uart,) = find_compatible(virt_tree, "arm,pl011")
    assert _reg(uart, 0)[0] == a72_board.uart["base"]
    kind, number, _flags = uart.cells("interrupts")
    assert kind == 0 and GIC_SPI_BASE + number == a72_board.uart["irq"]
    clock = virt_tree[next(p for p in virt_tree if p.startswith("/apb-pclk"))]
    assert clock.cells("clock-frequency") == [a72_board.uart["clock_hz"]]


def test_gic_and_timer_match_qemu(a72_board, virt_tree):
    table = port_aarch64.interrupt_facts(a72_board)
    (gic,) = find_compatible(virt_tree, "arm,cortex-a15-gic")  # a GICv2
    assert table["controller"] == "gicv2"
    assert _reg(gic, 0)[0] == table["distributor"]
    assert _reg(gic, 1)[0] == table["cpu_interface"]
    (timer,) = find_compatible(virt_tree, "arm,armv8-timer")
    cells = timer.cells("interrupts")
    kind, number = cells[3 * VIRTUAL_TIMER_SLOT], cells[3 * VIRTUAL_TIMER_SLOT + 1]
    assert kind == 1 and GIC_PPI_BASE + number == table["timer_irq"]


@pytest.mark.parametrize("name", LINUX_BOARDS)
def test_linux_board_conventions(name):
    board = boards.load(name)
    assert board.port == "linux" and board.arch == "aarch64"
    assert board.weights.origin == 0, "Linux boards: no fixed weight address (mmap)"
    assert board.weights.length >= 1 << 30
    assert board.weights_alignment == 4096
    assert "-static" in board.ldflags
    assert board.flash["method"] == "scp"
    assert board.emulate["qemu"] == "qemu-aarch64"


@pytest.mark.parametrize("name", LINUX_BOARDS + ["qemu_virt_a72"])
def test_cross_compiler_accepts_the_board_flags(name, tmp_path):
    board = boards.load(name)
    gcc = f"{board.cross_prefix}gcc"
    reason = missing_tool_reason(gcc)
    if reason:
        pytest.skip(reason)
    source = tmp_path / "empty.c"
    source.write_text("int colibri_probe(void);\nint colibri_probe(void) { return 0; }\n")
    done = subprocess.run([gcc, *board.cflags, "-Werror", "-c", str(source), "-o",
                           str(tmp_path / "empty.o")], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def _board_file(tmp_path, name: str, interrupts: str, uart_kind: str = "pl011") -> str:
    text = (REPO / "boards/qemu_virt_a72.toml").read_text()
    head, _, tail = text.partition("[interrupts]")
    tail = tail[tail.index("\n[ticks]"):]
    text = head.replace('name = "qemu_virt_a72"', f'name = "{name}"') + interrupts + tail
    text = text.replace('kind = "pl011"', f'kind = "{uart_kind}"')
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return str(path)


def _interrupts(controller: str = "gicv2", distributor: int = 0x08000000,
                timer_irq: int = 27) -> str:
    return (f'[interrupts]\ncontroller = "{controller}"\ndistributor = 0x{distributor:08X}\n'
            f"cpu_interface = 0x08010000\ntimer_irq = {timer_irq}\n")


@pytest.mark.parametrize("interrupts, uart_kind, message", [
    ("", "pl011", "missing [interrupts] table"),
    (_interrupts(controller="gicv3"), "pl011", "controller must be one of ['gicv2']"),
    (_interrupts(timer_irq=33), "pl011", "timer_irq 33 is not a PPI"),
    (_interrupts(distributor=0x08000100), "pl011", "distributor 0x8000100 is not 4 KiB aligned"),
    (_interrupts(), "16550", "kind must be 'pl011'"),
])
def test_port_config_rejects_boards_the_port_cannot_drive(tmp_path, interrupts, uart_kind,
                                                          message):
    module = port_aarch64
    path = _board_file(tmp_path, "bad_board", interrupts, uart_kind)
    with pytest.raises(boards.BoardError) as info:
        module.port_header(boards.load(path))
    assert message in str(info.value)
    assert module.main([path]) == 1


def test_port_config_header_for_qemu_virt_a72(a72_board):
    text = port_aarch64.port_header(a72_board)
    for line in ("#define COLIBRI_BOARD_GIC_DIST_BASE 0x08000000u",
                 "#define COLIBRI_BOARD_GIC_CPU_BASE 0x08010000u",
                 "#define COLIBRI_BOARD_TIMER_IRQ 27u"):
        assert line in text
