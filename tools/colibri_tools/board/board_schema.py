"""The board-file schema: every table and key a board file may hold, its
type, whether it must be there and the values it may take, in one list,
FIELDS. boards.load() checks each file against it before reading anything
else (check_fields), and docs/boards.md's table "Every field" is tested
against it (tests/tools/test_board_schema.py); `python -m
colibri_tools.board.board_schema` prints that table.

A wrong type or a value out of range is a BoardError naming the file, the
field and the rule, never a traceback:

    boards/x.toml: [uart] baud = 0: must be 300..12000000

What relates two fields (regions that must not overlap, the weight address a
multiple of the alignment, cflags holding -mcpu=<cpu>, the slot layout, a
UART clock fast enough for the baud) is boards.py's, after this check.

A field one port alone reads ([uart] kind/tx/rx/af, [ticks] source,
[cortex_m], [interrupts]) has its `owner`: its type is checked here, its
presence and values by that port's generator (port_cortex_m.py,
port_aarch64.py), which fails the firmware build with a message.

Keys not listed are ignored (a port may keep its own), except in [stacks].
"""
from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ColibriError


class BoardError(ColibriError):
    """A board file is missing, unreadable or inconsistent."""


ARCHES = ("aarch64", "armv7e-m", "armv8.1-m")
PORTS = ("baremetal-aarch64", "baremetal-cortex-m", "linux", "zephyr")
ADDRESS_BITS = {"aarch64": 64, "armv7e-m": 32, "armv8.1-m": 32}
FLASH_BACKENDS = ("qemu", "pyocd", "openocd", "west", "scp", "stm32cubeprogrammer")
# Each bare-metal port's stacks: board-file key, linker symbol (link.ld reads
# it from memory.ld), default size. A board file's [stacks] table overrides.
PORT_STACKS = {
    "baremetal-cortex-m": (("thread", "__cm_thread_stack_size", 0x4000),
                           ("handler", "__cm_handler_stack_size", 0x2000)),
    "baremetal-aarch64": (("main", "AARCH64_MAIN_STACK_SIZE", 0x10000),
                          ("irq", "AARCH64_IRQ_STACK_SIZE", 0x8000)),
}

# What a board file may put into generated make files, C headers and linker
# scripts: flags without spaces, quotes or make/shell syntax; plain unit text.
FLAG = re.compile(r"-[A-Za-z0-9_=.,+/:-]+")
CROSS_PREFIX = re.compile(r"([A-Za-z0-9_.+]+-)*")
UNIT_TEXT = re.compile(r"[ -!#-\[\]-~]{0,200}")  # printable ASCII but " and \\
WORD = re.compile(r"[^\s\"'\\]+")
LINE = re.compile(r"[^\x00-\x1f\x7f]*")

# The value kinds TOML gives, what each accepts, and how a message names it.
KINDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "integer": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "number": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "a number"),
    "string": (lambda v: isinstance(v, str), "a string"),
    "boolean": (lambda v: isinstance(v, bool), "true or false"),
    "list of strings": (lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
                        "a list of strings"),
    "string or list of strings": (lambda v: isinstance(v, str) or isinstance(v, list) and all(
        isinstance(x, str) for x in v), "a string or a list of strings"),
    "table": (lambda v: isinstance(v, dict), "a table"),
}


@dataclass(frozen=True)
class Context:
    """What a rule may depend on besides the value."""
    bits: int = 64                     # address bits of the board's arch
    kernels: tuple[str, ...] = ()      # the tables of sdk/src/kernels/tables.mk


@dataclass(frozen=True)
class Rule:
    """The values a field may take, as a test and in words."""
    text: str
    test: Callable[[Any, Context], bool] | None    # None: the owner's to test
    hex: bool = False                              # show a refused value in hex
    hint: Callable[[Context], str] | None = None   # more words for the message


@dataclass(frozen=True)
class Field:
    path: tuple[str, ...]    # ("uart", "baud"); a table: ("memory", "code")
    kind: str                # a key of KINDS
    required: str = "no"     # "yes" (when its table is there), "no", "bare-metal ports", or words
    rule: Rule | None = None
    owner: str = ""          # the port module that checks presence and values; "" = load

    @property
    def label(self) -> str:
        if self.kind == "table":
            return f"[{'.'.join(self.path)}]"
        if len(self.path) == 1:
            return self.path[0]
        return f"[{'.'.join(self.path[:-1])}] {self.path[-1]}"


def _pow2(lo: int, hi: int) -> Callable[[Any, Context], bool]:
    return lambda v, c: lo <= v <= hi and v & (v - 1) == 0


def _n(value: int) -> str:
    """A bound as people read it: 2^32, 2^32-1, 2^32-16, or decimal."""
    for delta, suffix in ((0, ""), (1, "-1"), (16, "-16")):
        bits = (value + delta).bit_length() - 1
        if bits >= 16 and value + delta == 1 << bits:
            return f"2^{bits}{suffix}"
    return str(value)


def between(lo: int, hi: int, words: str = "") -> Rule:
    return Rule(f"{_n(lo)}..{_n(hi)}" + (f" ({words})" if words else ""),
                lambda v, c: lo <= v <= hi)


def one_of(*names: str, each: bool = False) -> Rule:
    text = ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]
    if each:
        return Rule(f"names among {', '.join(names)}", lambda v, c: all(n in names for n in v))
    return Rule(text, lambda v, c: v in names)


def matches(pattern: re.Pattern, text: str, each: bool = False) -> Rule:
    if each:
        return Rule(text, lambda v, c: all(pattern.fullmatch(x) for x in ([v] if isinstance(
            v, str) else v)))
    return Rule(text, lambda v, c: bool(pattern.fullmatch(v)))


def _kernels_ok(names: list[str], c: Context) -> bool:
    return all(n in c.kernels for n in names) and len(set(names)) == len(names)


ADDRESS = Rule("below 2^32 (armv7e-m, armv8.1-m) or 2^64 (aarch64)",
               lambda v, c: 0 <= v < 1 << c.bits, hex=True)
SIZE = Rule("1..2^32 (armv7e-m, armv8.1-m) or 1..2^64 (aarch64)",
            lambda v, c: 0 < v <= 1 << c.bits, hex=True)
TEXT = matches(LINE, "one line of text")
WORDS = matches(WORD, "one word: no spaces, quotes or backslashes")
BOOLEAN = Rule("true or false", None)    # the type says it all
LINES = matches(LINE, "one line of text each", each=True)
CPU = re.compile(r"[a-z0-9][a-z0-9.+_-]*")
NAME = re.compile(r"[a-z][a-z0-9_]*")
PIN = "PA0..PK15 (stm32-usart)"


def _top_level() -> list[Field]:
    return [
        Field(("name",), "string", "yes", matches(NAME, "lower-case letters, digits and _, a letter "
                                                  "first (a C macro and a make target)")),
        Field(("description",), "string", "no", TEXT),
        Field(("arch",), "string", "yes", one_of(*ARCHES)),
        Field(("cpu",), "string", "yes", matches(CPU, "a GCC -mcpu name: lower-case letters, "
                                                 "digits and . + _ -")),
        Field(("port",), "string", "yes", one_of(*PORTS)),
        Field(("cross_prefix",), "string", "no", matches(CROSS_PREFIX, "a tool prefix like "
                                                         "arm-none-eabi-, or empty")),
        Field(("cflags",), "list of strings", "yes", matches(
            FLAG, "plain -options: a dash, then letters, digits and _ = . , + / : -", each=True)),
        Field(("ldflags",), "list of strings", "no", matches(
            FLAG, "plain -options: a dash, then letters, digits and _ = . , + / : -", each=True)),
        Field(("kernels",), "list of strings", "no", Rule(
            "tables of sdk/src/kernels/tables.mk, each once", lambda v, c: _kernels_ok(v, c),
            hint=lambda c: f"tables.mk has: {', '.join(c.kernels) or 'none'}")),
        Field(("zephyr_board",), "string", "no", matches(
            re.compile(r"[A-Za-z0-9_./@-]*"), "a Zephyr board target: letters, digits and _ . / @ -")),
    ]


def _memory_and_weights() -> list[Field]:
    regions = [f for name in ("code", "ram") for f in (
        Field(("memory", name), "table", "bare-metal ports"),
        Field(("memory", name, "origin"), "integer", "yes", ADDRESS),
        Field(("memory", name, "length"), "integer", "yes", SIZE))]
    stacks = [Field(("stacks", key), "integer", "no", Rule(
        f"a multiple of 16, 16..2^32-16; {port} only (default {default})",
        lambda v, c: 0 < v < 1 << 32 and v % 16 == 0)) for port, keys in PORT_STACKS.items()
        for key, _, default in keys]
    return [
        Field(("memory",), "table"), *regions, Field(("stacks",), "table"), *stacks,
        Field(("weights",), "table", "yes"),
        Field(("weights", "address"), "integer", "yes", ADDRESS),
        Field(("weights", "size"), "integer", "yes", SIZE),
        Field(("weights", "alignment"), "integer", "no", Rule(
            "a power of two, 64..2^31 (default 4096)", _pow2(64, 1 << 31))),
        Field(("weights", "bandwidth"), "number", "no", Rule(
            "above 0, below 1e15 (bytes per second)", lambda v, c: 0 < v < 1e15)),
        Field(("weights", "bandwidth_source"), "string", "with bandwidth", TEXT),
        Field(("slots",), "table"),
        Field(("slots", "origin"), "integer", "yes", ADDRESS),
        Field(("slots", "length"), "integer", "yes", SIZE),
        Field(("slots", "sector"), "integer", "yes", Rule(
            "a power of two, 4096..2^24 (4 KiB..16 MiB)", _pow2(4096, 1 << 24))),
        Field(("slots", "store"), "string", "no", matches(
            re.compile(r"[A-Za-z0-9_./-]*"), "a plain path: letters, digits and _ . / -")),
    ]


def _console_and_ticks() -> list[Field]:
    cm, a64 = "port_cortex_m", "port_aarch64"
    return [
        Field(("uart",), "table"),
        Field(("uart", "kind"), "string", "bare-metal ports", Rule(
            "pl011 (baremetal-aarch64); cmsdk-apb or stm32-usart (baremetal-cortex-m)", None),
            owner=f"{cm}, {a64}"),
        Field(("uart", "base"), "integer", "no", ADDRESS),
        Field(("uart", "clock_hz"), "integer", "no", between(1, (1 << 32) - 1, "at least 16 x baud")),
        Field(("uart", "baud"), "integer", "no", between(300, 12_000_000, "default 115200")),
        Field(("uart", "irq"), "integer", "no", between(0, 1019, "an NVIC IRQ or a GIC INTID")),
        Field(("uart", "tx"), "string", "stm32-usart", Rule(PIN, None), owner=cm),
        Field(("uart", "rx"), "string", "stm32-usart", Rule(PIN, None), owner=cm),
        Field(("uart", "af"), "integer", "stm32-usart", Rule("0..15 (stm32-usart)", None), owner=cm),
        Field(("ticks",), "table"),
        Field(("ticks", "source"), "string", "bare-metal ports", Rule(
            "systick (baremetal-cortex-m), pmccntr (baremetal-aarch64); words elsewhere", None),
            owner=f"{cm}, {a64}"),
        Field(("ticks", "hz"), "integer", "no", between(
            0, (1 << 32) - 1, "0: a tick is not a unit of time; Cortex-M: a multiple of 1000")),
        Field(("ticks", "unit"), "string", "no", matches(
            UNIT_TEXT, "printable ASCII without double quote or backslash, at most 200 characters")),
        Field(("cortex_m",), "table", owner=cm),
        Field(("cortex_m", "clocks"), "string", "no", Rule("as-reset or stm32h7-hsi64", None),
              owner=cm),
        Field(("cortex_m", "caches"), "boolean", "no", BOOLEAN, owner=cm),
        Field(("cortex_m", "weights_ready"), "string", "no", Rule(
            "always or stm32h7-quadspi", None), owner=cm),
        Field(("cortex_m", "mpu_guard"), "table", "no", Rule(
            "holds the weights; ARMv7-M: a power of two aligned to its size; ARMv8-M: 32-byte "
            "granules", None), owner=cm),
        Field(("cortex_m", "mpu_guard", "origin"), "integer", "yes", Rule("0 or more", None),
              owner=cm),
        Field(("cortex_m", "mpu_guard", "length"), "integer", "yes", Rule("0 or more", None),
              owner=cm),
        Field(("interrupts",), "table", "baremetal-aarch64", owner=a64),
        Field(("interrupts", "controller"), "string", "yes", Rule("gicv2", None), owner=a64),
        Field(("interrupts", "distributor"), "integer", "yes", Rule(
            "0 or more, a multiple of 4096", None), owner=a64),
        Field(("interrupts", "cpu_interface"), "integer", "yes", Rule(
            "0 or more, a multiple of 4096", None), owner=a64),
        Field(("interrupts", "timer_irq"), "integer", "yes", Rule("16..31 (a PPI)", None),
              owner=a64),
    ]


def _emulate_and_flash() -> list[Field]:
    qemu_size = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*", re.IGNORECASE)
    return [
        Field(("emulate",), "table"),
        Field(("emulate", "qemu"), "string", "no", WORDS),
        Field(("emulate", "machine"), "string", "no", WORDS),
        Field(("emulate", "cpu"), "string", "no", WORDS),
        Field(("emulate", "memory"), "string", "no", matches(qemu_size, "a QEMU -m size: 16M, 2G")),
        Field(("emulate", "extra"), "list of strings", "no", LINES),
        Field(("emulate", "slots_drive"), "string", "no", WORDS),
        Field(("flash",), "table"),
        Field(("flash", "method"), "string", "no", one_of(*FLASH_BACKENDS)),
        Field(("flash", "backends"), "list of strings", "no", one_of(*FLASH_BACKENDS, each=True)),
        Field(("flash", "weights_memory"), "string", "no", one_of("internal", "external")),
        Field(("flash", "pyocd_target"), "string", "no", WORDS),
        Field(("flash", "pyocd_pack"), "string", "no", TEXT),
        Field(("flash", "pyocd_script"), "string", "no", TEXT),
        Field(("flash", "pyocd_qspi"), "boolean", "no", BOOLEAN),
        Field(("flash", "openocd_config"), "string or list of strings", "no", LINES),
        Field(("flash", "openocd_qspi_bank"), "string", "no", WORDS),
        Field(("flash", "openocd_external"), "string or list of strings", "no", LINES),
        Field(("flash", "openocd_start"), "string or list of strings", "no", LINES),
        Field(("flash", "west_runner"), "string", "no", WORDS),
        Field(("flash", "west_weights_args"), "string or list of strings", "no", LINES),
        Field(("flash", "cubeprogrammer_external_loader"), "string", "no", TEXT),
        Field(("flash", "path"), "string", "no", TEXT),
        Field(("flash", "host"), "string", "no", WORDS),
        Field(("flash", "firmware_address"), "integer", "no", ADDRESS),
        Field(("flash", "weights_address"), "integer", "no", ADDRESS),
    ]


def _trustzone() -> list[Field]:
    tz = "port_trustzone"
    granules = "0..2^32-1, a multiple of 32 (the SAU's granule)"
    regions = {"nsc": "in [memory.code], below ns_code: the Secure entries' veneers",
               "ns_code": "in [memory.code], above nsc: the Non-secure code",
               "ns_ram": "clear of [memory.ram], [memory.code] and the weights"}
    fields = [Field(("trustzone",), "table", owner=tz)]
    for key, words in regions.items():
        fields += [Field(("trustzone", key), "table", "yes", Rule(words, None), owner=tz),
                   Field(("trustzone", key, "origin"), "integer", "yes", Rule(granules, None),
                         owner=tz),
                   Field(("trustzone", key, "length"), "integer", "yes", Rule(
                       "1..2^32, a multiple of 32, the end at most 2^32", None), owner=tz)]
    return fields


FIELDS: tuple[Field, ...] = (*_top_level(), *_memory_and_weights(), *_console_and_ticks(),
                             *_emulate_and_flash(), *_trustzone())


def _shown(value: Any, rule: Rule | None) -> str:
    if rule is not None and rule.hex and isinstance(value, int) and not isinstance(value, bool):
        return f"{'-' if value < 0 else ''}0x{abs(value):X}"
    return repr(value)


def _lookup(data: dict, path: tuple[str, ...]) -> tuple[bool, Any]:
    """(present, value) of a field; a table that is absent holds nothing."""
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return False, None
        data = data[key]
    return True, data


def _must_be_there(field: Field, data: dict) -> bool:
    if field.owner:
        return False
    parent_present = len(field.path) == 1 or _lookup(data, field.path[:-1])[0]
    if field.required == "yes":
        return parent_present
    if field.required == "bare-metal ports":
        return str(data.get("port", "")).startswith("baremetal-")
    return False


def check_field(field: Field, data: dict, where: str, ctx: Context) -> None:
    """One field of a parsed board file against its entry in FIELDS."""
    present, value = _lookup(data, field.path)
    if not present:
        if _must_be_there(field, data):
            table = f" [{'.'.join(field.path[:-1])}]" if len(field.path) > 1 else ""
            what = field.label if field.kind == "table" else f"key '{field.path[-1]}'"
            needs = "" if field.required == "yes" else f" ({field.required} need it)"
            raise BoardError(f"{where}{'' if field.kind == 'table' else table}: missing {what}"
                             f"{needs}")
        return
    accepts, words = KINDS[field.kind]
    if not accepts(value):
        raise BoardError(f"{where}: {field.label} = {_shown(value, None)}: must be {words}")
    rule = field.rule
    if field.owner or rule is None or rule.test is None or rule.test(value, ctx):
        return
    hint = f"; {rule.hint(ctx)}" if rule.hint else ""
    raise BoardError(f"{where}: {field.label} = {_shown(value, rule)}: must be {rule.text}{hint}")


def check_fields(data: dict, where: str, kernels: list[str] | tuple[str, ...] = ()) -> None:
    """Every field of a parsed board file: type, presence and range (FIELDS,
    in order: arch and port come before what depends on them)."""
    arch = data.get("arch")
    ctx = Context(ADDRESS_BITS.get(arch, 64) if isinstance(arch, str) else 64, tuple(kernels))
    for field in FIELDS:
        check_field(field, data, where, ctx)


def doc_rows() -> list[tuple[str, str, str, str, str]]:
    """docs/boards.md's table "Every field": field, type, required, range, checked by."""
    return [(f"`{f.label}`", f.kind, f.required, f.rule.text if f.rule else "-",
             f.owner or "load") for f in FIELDS]


def doc_table() -> str:
    head = ("field", "type", "required", "range", "checked by")
    rows = [head, ("---",) * len(head), *doc_rows()]
    return "".join("| " + " | ".join(row) + " |\n" for row in rows)


if __name__ == "__main__":
    sys.stdout.write(doc_table())
