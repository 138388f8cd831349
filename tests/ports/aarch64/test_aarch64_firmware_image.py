"""Properties of the linked AArch64 firmware ELF that no run shows: what it
links against, where its sections and symbols are, that startup code keeps
off the FP/SIMD registers, and the interrupt stack bound from GCC's stack
usage (-fstack-usage / -fcallgraph-info) against the painted measurement.
"""
from __future__ import annotations

import itertools
import pathlib
import re
import subprocess
import tempfile

from aarch64_helpers import REPO, elf_symbols
from kernel_slots import KERNEL_CALLERS, kernel_functions
from stack_usage import add_disassembly, indirect_callers, load_callgraph, title, worst_stack

# Nothing that allocates, talks to an OS or starts a hosted C runtime.
FORBIDDEN = {"malloc", "free", "calloc", "realloc", "_sbrk", "sbrk", "brk", "__libc_malloc",
             "_malloc_r", "printf", "puts", "fwrite", "abort", "exit", "_exit", "syscall",
             "__libc_start_main", "_IO_stdin_used", "__errno_location_tls", "pthread_create"}
FP_REGISTER = re.compile(r"\b[qdsvbh](?:[0-9]|[12][0-9]|3[01])\b")
CONTEXT_FRAME = 800  # ports/baremetal/aarch64/context.h: CTX_SIZE


def _nm(firmware) -> dict[str, tuple[int, str]]:
    return elf_symbols(f"{firmware.board.cross_prefix}nm", firmware.elf)


def test_links_no_allocator_and_no_os(selftest_firmware):
    symbols = _nm(selftest_firmware)
    assert not FORBIDDEN & set(symbols), sorted(FORBIDDEN & set(symbols))
    undefined = sorted(name for name, (_, kind) in symbols.items() if kind in "Uw")
    assert undefined == [], f"unresolved symbols: {undefined}"
    assert {"colibri_expf", "memcpy", "colibri_forward", "board_run_in_interrupt"} <= set(symbols)
    assert not {"expf", "powf", "sinf", "cosf", "sqrtf"} & set(symbols), "no libm is linked"


def test_weight_symbols_equal_the_board_file(selftest_firmware):
    board = selftest_firmware.board
    symbols = _nm(selftest_firmware)
    assert symbols["__colibri_weights_start"][0] == board.weights.origin == 0x90000000
    assert symbols["__colibri_weights_size"][0] == board.weights.length
    header = (selftest_firmware.directory / "board_config.h").read_text()
    assert f"#define COLIBRI_BOARD_WEIGHTS_ADDR 0x{board.weights.origin:08X}u" in header


def test_entry_and_vectors(selftest_firmware):
    board = selftest_firmware.board
    symbols = _nm(selftest_firmware)
    header = subprocess.run([f"{board.cross_prefix}readelf", "-h", str(selftest_firmware.elf)],
                            capture_output=True, text=True, check=True).stdout
    entry = int(re.search(r"Entry point address:\s+(0x[0-9a-f]+)", header).group(1), 16)
    assert entry == symbols["_start"][0] == board.code.origin
    assert symbols["aarch64_vectors"][0] % 2048 == 0, "VBAR_EL1 needs 2 KiB alignment"


def _sections(firmware) -> list[tuple[str, int, int, int]]:
    """(name, size, VMA, LMA) of every allocated section, from objdump -h."""
    out = subprocess.run([f"{firmware.board.cross_prefix}objdump", "-h", str(firmware.elf)],
                         capture_output=True, text=True, check=True).stdout
    rows = []
    lines = out.splitlines()
    for line, flags in itertools.pairwise(lines):
        words = line.split()
        if len(words) >= 6 and words[0].isdigit() and "ALLOC" in flags:
            rows.append((words[1], int(words[2], 16), int(words[3], 16), int(words[4], 16)))
    return rows


def test_sections_lie_in_the_board_regions(selftest_firmware):
    board = selftest_firmware.board
    code, ram = board.code, board.ram

    def inside(region, start, size):
        return region.origin <= start and start + size <= region.end

    sections = _sections(selftest_firmware)
    assert {".text", ".rodata", ".data", ".bss", ".stacks"} <= {s[0] for s in sections}
    for name, size, vma, lma in sections:
        if name in (".text", ".rodata"):
            assert inside(code, vma, size), name
        else:
            assert inside(ram, vma, size), name
            if name == ".data":
                assert inside(code, lma, size), f"{name} load image must be in CODE"
        assert not board.weights.overlaps(type(board.weights)(vma, max(size, 1))), name


def test_startup_code_uses_no_fp_simd_registers(selftest_firmware):
    """mmu.c and semihosting.c run with the MMU off (and, for semihosting,
    possibly before FP is enabled): -mgeneral-regs-only must hold."""
    objdump = f"{selftest_firmware.board.cross_prefix}objdump"
    for name in ("mmu.c.o", "semihosting.c.o"):
        obj = selftest_firmware.objects / "ports/baremetal/aarch64" / name
        text = subprocess.run([objdump, "-d", "--no-show-raw-insn", str(obj)],
                              capture_output=True, text=True, check=True).stdout
        for line in text.splitlines():
            instruction = line.partition("\t")[2].partition("//")[0]
            instruction = re.sub(r"[0-9a-f]+ <[^>]*>", "", instruction)  # branch targets
            assert not FP_REGISTER.search(instruction), f"{name}: {line}"


def test_interrupt_stack_bound(selftest_firmware, selftest_run, record_property):
    """Static bound (the 800-byte register frame plus the deepest call chain
    under the dispatcher, indirect calls resolved) >= the painted measurement,
    and both fit the interrupt stack link.ld reserves."""
    prefix = selftest_firmware.board.cross_prefix
    graph = load_callgraph(selftest_firmware.objects)
    add_disassembly(graph, selftest_firmware.elf, f"{prefix}objdump", f"{prefix}nm")
    kernels = {title(graph, name) for name in kernel_functions(selftest_firmware.board.kernels)}
    indirect = {
        "aarch64_irq_handle": {title(graph, "run_prompt_job")},   # the job passed in
        "colibri_forward": {title(graph, "port_ticks")} | kernels,  # .ticks, kernel slots
        "colibri_ffn_forward": kernels,                           # .prefetch: NULL here
    }
    root = "aarch64_exception_dispatch"
    for caller in indirect_callers(graph, root, indirect) - set(indirect):
        assert caller.rsplit(":", 1)[-1] in KERNEL_CALLERS, f"unresolved indirect call in {caller}"
        indirect[caller] = kernels                                # model->kernels.*
    assert indirect_callers(graph, root, indirect) == set(indirect)
    depth, chain = worst_stack(graph, root, indirect)
    static_bound = CONTEXT_FRAME + depth
    painted = int(selftest_run.field("isr", "stack_used"))
    symbols = _nm(selftest_firmware)
    reserved = symbols["__irq_stack_top"][0] - symbols["__irq_stack_bottom"][0]
    record_property("isr_stack_static_bound", static_bound)
    record_property("isr_stack_painted", painted)
    assert CONTEXT_FRAME < painted <= static_bound <= reserved, (painted, static_bound, chain)


def test_port_sources_have_no_address_literals():
    """Board facts come from board_config.h / aarch64_board.h, never literals."""
    port = REPO / "ports/baremetal/aarch64"
    for path in sorted(port.glob("*.[chS]")):
        text = path.read_text()
        for literal in ("0x09000000", "0x9000000", "0x08000000", "0x08010000", "0x90000000",
                        "0x40000000"):
            assert literal not in text.lower(), f"{path.name} hard-codes {literal}"


def test_uses_no_linux_c_library(selftest_firmware):
    """The firmware is built -nostdinc and linked -nostdlib: no glibc header
    (libc6-dev-arm64-cross, where installed) and no C or math library."""
    deps = " ".join(d.read_text() for d in selftest_firmware.objects.rglob("*.d"))
    headers = {pathlib.Path(h).resolve() for h in re.findall(r"(?:^|\s)(/\S+\.h)\b", deps)}
    assert any(h.name == "stdint.h" for h in headers), "dependency files list no system header"
    compiler = pathlib.Path(subprocess.run(
        [f"{selftest_firmware.board.cross_prefix}gcc", "-print-file-name=include"],
        capture_output=True, text=True, check=True).stdout.strip()).resolve()
    foreign = sorted(str(h) for h in headers if compiler not in h.parents and REPO not in h.parents
                     and not str(h).startswith(tempfile.gettempdir()))
    assert foreign == [], f"headers from outside the compiler and the repository: {foreign}"
    link_map = (selftest_firmware.directory / "firmware.map").read_text()
    assert not re.search(r"lib(c|m)\.a\b", link_map), "a C or math library was linked"
