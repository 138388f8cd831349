"""Is this firmware (or colibri-run) built for this board? And, when an
emulated board stops on a fault, what happened, in words.

check_firmware(board, path) refuses, before anything is merged, flashed or
booted: an ELF for another machine (EM_ARM vs EM_AARCH64 vs x86-64), of the
wrong class, for another CPU (the ARM build attributes' Tag_CPU_name against
the board's cpu), whose entry point or loaded bytes lie outside the board's
code region, or whose segments run outside its code and RAM; a HEX whose
bytes or start address lie outside the code region. For Linux boards the
file is colibri-run: machine and class must match the board's arch.

explain_exit(board, status, console, stderr, firmware) turns a firmware's
fault exit into sentences: the Cortex-M fault handler's FAULT line (CFSR,
HFSR and fault address decoded), the AArch64 handler's report, a QEMU
lockup (a fault inside the fault handler), or a fault exit whose report
never reached the console.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import ColibriError
from .boards import Board, Region
from .elf import ElfError, ElfInfo, read_elf
from .hex_records import span

EM_NAMES = {3: "x86 (i386)", 40: "ARM (32-bit)", 62: "x86-64", 183: "AArch64", 243: "RISC-V"}
ARCH_MACHINE = {"aarch64": (183, 64), "armv7e-m": (40, 32), "armv8.1-m": (40, 32)}
CM_EXIT_FAULT = 250        # ports/baremetal/cortex_m/cortex_m.h
AARCH64_EXIT_FAULT = 3     # ports/baremetal/aarch64/exceptions.c


class BoardMismatch(ColibriError):
    """A firmware or binary built for another board, CPU or machine."""


# Tag_CPU_arch values (ARM IHI 0045, "Addenda to the ABI for the Arm Architecture").
CPU_ARCH = {"armv7e-m": 13, "armv8.1-m": 21}
CPU_ARCH_NAMES = {10: "Armv7-A", 11: "Armv6-M", 12: "Armv6S-M", 13: "Armv7E-M", 14: "Armv8-A",
                  16: "Armv8-M baseline", 17: "Armv8-M mainline", 21: "Armv8.1-M mainline"}


def _inside(lo: int, hi: int, regions: list[tuple[str, Region]]) -> bool:
    return any(r.origin <= lo and hi <= r.end for _, r in regions)


def _regions_text(regions: list[tuple[str, Region]]) -> str:
    return ", ".join(f"{name} {span(r.origin, r.end)}" for name, r in regions)


def _check_machine(board: Board, info: ElfInfo, path: Path, what: str) -> None:
    machine, bits = ARCH_MACHINE[board.arch]
    if info.machine != machine or info.bits != bits:
        got = EM_NAMES.get(info.machine, f"machine {info.machine}")
        raise BoardMismatch(
            f"{what} is an ELF{info.bits} for {got}, but board {board.name} is {board.arch} "
            f"({EM_NAMES[machine]}, ELF{bits}): it was built for another machine"
            + (" (the host's colibri-run? build it with make linux-cross BOARD="
               f"{board.name})" if board.port == "linux" else ""), path=path)


def _check_cpu(board: Board, info: ElfInfo, path: Path, what: str) -> None:
    """Tag_CPU_name when it names a core (GCC's -mcpu), else Tag_CPU_arch."""
    name = (info.cpu_name or "").lower()
    if name.startswith("cortex-") and name != board.cpu.lower():
        raise BoardMismatch(f"{what} was built for {info.cpu_name} (its ARM build attributes), "
                            f"but board {board.name} has a {board.cpu}", path=path)
    want = CPU_ARCH.get(board.arch)
    if info.cpu_arch is not None and want is not None and info.cpu_arch != want:
        got = CPU_ARCH_NAMES.get(info.cpu_arch, f"architecture {info.cpu_arch}")
        raise BoardMismatch(f"{what} was built for {got} (its ARM build attributes), but board "
                            f"{board.name} has a {board.cpu} ({CPU_ARCH_NAMES[want]})", path=path)


def _check_layout(board: Board, info: ElfInfo, path: Path, what: str) -> None:
    code = [("code", board.code)]
    memory = code + [("RAM", board.ram)]
    # e_entry 0 means "no entry point" (ELF spec): nothing to check then.
    if info.entry and not _inside(info.entry & ~1, (info.entry & ~1) + 1, code):
        raise BoardMismatch(f"{what}'s entry point 0x{info.entry:08X} lies outside board "
                            f"{board.name}'s code region {span(board.code.origin, board.code.end)}"
                            ": it was linked for another board", path=path)
    for i, seg in enumerate(info.segments):
        if seg.filesz and not _inside(seg.paddr, seg.paddr + seg.filesz, code):
            raise BoardMismatch(
                f"{what}'s segment {i} loads at {span(seg.paddr, seg.paddr + seg.filesz)}, "
                f"outside board {board.name}'s code region {span(board.code.origin, board.code.end)}"
                ": it was linked for another board", path=path)
        if not _inside(seg.vaddr, seg.vaddr + seg.memsz, memory):
            raise BoardMismatch(
                f"{what}'s segment {i} runs at {span(seg.vaddr, seg.vaddr + seg.memsz)}, outside "
                f"board {board.name}'s memory ({_regions_text(memory)}): it was linked for "
                "another board", path=path)


def _check_hex(board: Board, path: Path, what: str) -> None:
    from .hex_firmware import load_firmware

    fw = load_firmware(path)
    memory = [("code", board.code), ("RAM", board.ram)]
    for piece in fw.pieces:
        if not _inside(piece.address, piece.end, memory):
            raise BoardMismatch(f"{what} writes {span(piece.address, piece.end)}, outside board "
                                f"{board.name}'s code and RAM ({_regions_text(memory)}): it was "
                                "built for another board", path=path)
    if fw.start is not None and fw.start[0] == 5:
        entry = int.from_bytes(fw.start[1], "big")
        if not _inside(entry & ~1, (entry & ~1) + 1, memory[:1]):
            raise BoardMismatch(f"{what}'s start address 0x{entry:08X} lies outside board "
                                f"{board.name}'s code region", path=path)


def check_firmware(board: Board, path: str | Path, what: str | None = None) -> None:
    """Refuse a firmware (bare-metal boards) or colibri-run (Linux boards)
    built for another board; see the module docstring."""
    path = Path(path)
    what = what or path.name
    try:
        info = read_elf(path)
    except ElfError as exc:
        raise BoardMismatch(exc.message, path=path, offset=exc.offset) from None
    if info is None:
        if board.port == "linux":
            raise BoardMismatch(f"{what} is not an ELF executable: board {board.name} runs "
                                "colibri-run built with make linux-cross", path=path)
        if board.bare_metal and path.read_bytes()[:64].lstrip()[:1] == b":":
            _check_hex(board, path, what)
        return
    _check_machine(board, info, path, what)
    if board.arch != "aarch64":
        _check_cpu(board, info, path, what)
    # A Zephyr image has the memory map of Zephyr's board (devicetree), not
    # the bare-metal port's: only machine and CPU are the board file's to check.
    if board.bare_metal and not is_zephyr(info):
        _check_layout(board, info, path, what)


def is_zephyr(info: ElfInfo) -> bool:
    """A Zephyr kernel image (it has the kernel's z_cstart)."""
    return any(name == "z_cstart" for _, _, name in info.symbols)


# ---- fault exits, in words ------------------------------------------------------------

CM_EXCEPTIONS = {2: "NMI", 3: "HardFault", 4: "MemManage fault", 5: "BusFault",
                 6: "UsageFault", 7: "SecureFault", 12: "DebugMonitor"}
CFSR_BITS = [
    (0, "instruction fetch from a no-execute or protected region (IACCVIOL)"),
    (1, "data access to a protected region (DACCVIOL)"),
    (3, "exception return unstacking hit a protected region (MUNSTKERR)"),
    (4, "exception entry stacking hit a protected region (MSTKERR)"),
    (5, "lazy floating-point state preservation hit a protected region (MLSPERR)"),
    (8, "bus error on an instruction fetch (IBUSERR)"),
    (9, "precise bus error on a data access (PRECISERR)"),
    (10, "imprecise bus error on a data access (IMPRECISERR)"),
    (11, "exception return unstacking got a bus error (UNSTKERR)"),
    (12, "exception entry stacking got a bus error: the stack pointer is not in RAM "
         "(STKERR)"),
    (13, "lazy floating-point state preservation got a bus error (LSPERR)"),
    (16, "undefined instruction: code for another CPU? (UNDEFINSTR)"),
    (17, "invalid state: a branch to an address without the Thumb bit (INVSTATE)"),
    (18, "invalid exception return value (INVPC)"),
    (19, "coprocessor or FPU instruction with the unit disabled or absent (NOCP)"),
    (20, "stack overflow: the stack pointer went below its limit (STKOF)"),
    (24, "unaligned access (UNALIGNED)"),
    (25, "division by zero (DIVBYZERO)"),
]


def _where(pc: int, symbols) -> str:
    for start, size, name in symbols:
        if start <= pc < start + max(size, 1):
            return f"0x{pc:08X} ({name} + 0x{pc - start:X})"
    return f"0x{pc:08X}"


def _fields(line: str) -> dict[str, int]:
    return {k: int(v, 16) for k, v in re.findall(r"(\w+)=0x([0-9A-Fa-f]+)", line)}


def _explain_cm_fault(line: str, symbols) -> str:
    f = _fields(line)
    exc = f.get("exception", 0) & 0x1FF
    cfsr, hfsr = f.get("cfsr", 0), f.get("hfsr", 0)
    causes = [text for bit, text in CFSR_BITS if cfsr >> bit & 1]
    if hfsr >> 1 & 1:
        causes.append("bus error reading the vector table (HFSR.VECTTBL)")
    text = f"{CM_EXCEPTIONS.get(exc, f'exception {exc}')}"
    if hfsr >> 30 & 1 and exc == 3:
        text += " (escalated from a configurable fault: HFSR.FORCED)"
    text += ": " + ("; ".join(causes) if causes else "no fault status bit set")
    if cfsr >> 7 & 1:
        text += f"; faulting address 0x{f.get('mmfar', 0):08X} (MMFAR)"
    if cfsr >> 15 & 1:
        text += f"; faulting address 0x{f.get('bfar', 0):08X} (BFAR)"
    if "pc" in f:
        caller = _where(f.get("lr", 0) & ~1, symbols)
        text += f"; at pc {_where(f['pc'], symbols)}, called from lr {caller}"
    return text


def explain_exit(board: Board, status: int, console: str = "", stderr: str = "",
                 firmware: str | Path | None = None) -> str | None:
    """A sentence saying what a firmware's fault exit means; None when the
    status is not a fault (0, or the application's own status)."""
    try:
        info = read_elf(firmware) if firmware is not None and Path(firmware).is_file() else None
    except ElfError:
        info = None
    symbols = info.symbols if info else ()
    text = console + "\n" + stderr
    lockup = re.search(r"Lockup: can't escalate (\d+) to HardFault", stderr)
    if lockup:
        pc = re.search(r"R15=([0-9a-fA-F]+)", stderr)
        where = f" at pc {_where(int(pc.group(1), 16), symbols)}" if pc else ""
        handler = CM_EXCEPTIONS.get(int(lockup.group(1)), "fault")
        return (f"the CPU locked up{where}: a fault inside the {handler} handler (the fault "
                "handler itself faulted, so no report could be printed)"
                + _mismatch_hint(board, firmware))
    if board.port == "baremetal-cortex-m" and status == CM_EXIT_FAULT:
        line = next((ln for ln in text.splitlines() if ln.startswith("FAULT")), None)
        if line is None:
            return ("the firmware's fault handler ended the run (exit 250) but its report did "
                    "not reach the console" + _mismatch_hint(board, firmware))
        if "unexpected exception" in line:
            exc = _fields(line).get("exception", 0) & 0x1FF
            return f"unexpected exception {exc} (no handler for it): the firmware stopped"
        return _explain_cm_fault(line, symbols)
    if board.port == "baremetal-aarch64" and status == AARCH64_EXIT_FAULT:
        lines = [ln.strip() for ln in text.splitlines() if "colibri: fault:" in ln or "ELR_EL1" in ln]
        if not lines:
            return None            # exit 3 is also an application status
        elr = re.search(r"ELR_EL1 0x([0-9a-f]+)", text)
        where = f"; at {_where(int(elr.group(1), 16), symbols)}" if elr else ""
        return lines[0].split("colibri: fault: ", 1)[-1] + where
    return None


def _mismatch_hint(board: Board, firmware: str | Path | None) -> str:
    if firmware is None:
        return ""
    try:
        check_firmware(board, firmware)
    except BoardMismatch as exc:
        return f". Likely why: {exc.message}"
    except ColibriError:
        return ""
    return ""
