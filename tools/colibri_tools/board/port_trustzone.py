"""The TrustZone-M split of a Cortex-M board (ports/baremetal/trustzone,
docs/trustzone.md), from the board file's [trustzone] table:

    [trustzone]
    nsc     = { origin, length }   the Secure entries' veneers (SAU: Non-secure callable)
    ns_code = { origin, length }   the Non-secure application's code
    ns_ram  = { origin, length }   its data, stacks and buffers

The Secure image keeps everything else: [memory.code] below nsc, [memory.ram],
the weights and the peripherals. The three regions must be in 32-byte granules
(the SAU's), nsc and ns_code inside [memory.code] with nsc below ns_code (the
Secure code ends at nsc), ns_ram clear of [memory.ram] and of the weights,
and neither Non-secure region the other alias (address bit 28, the IDAU's)
of Secure memory.

    python -m colibri_tools.board.port_trustzone header BOARD [-o tz_config.h]
    python -m colibri_tools.board.port_trustzone ld-secure BOARD [-o tz_secure.ld]
    python -m colibri_tools.board.port_trustzone ld-ns BOARD [-o tz_ns_memory.ld]
"""
from __future__ import annotations

import sys
import tomllib

from .boards import Board, BoardError, Region, generator_main
from .port_cortex_m import PORT

REGIONS = ("nsc", "ns_code", "ns_ram")
SAU_GRANULE = 32
IDAU_ALIAS_BIT = 1 << 28  # the SSE-200/300 IDAU: bit 28 set is the Secure alias of the same memory


def _region(table: dict, key: str, where: str) -> Region:
    value = table.get(key)
    if not isinstance(value, dict) or set(value) != {"origin", "length"}:
        raise BoardError(f"{where}: {key} must be a table {{ origin, length }}")
    origin, length = value["origin"], value["length"]
    for name, number in (("origin", origin), ("length", length)):
        if isinstance(number, bool) or not isinstance(number, int) or not 0 <= number < 1 << 32:
            raise BoardError(f"{where}: {key}.{name} must be an integer 0 .. 0xFFFFFFFF")
    if length == 0 or origin % SAU_GRANULE or length % SAU_GRANULE or origin + length > 1 << 32:
        raise BoardError(f"{where}: {key}: origin and length must be multiples of the SAU's "
                         f"{SAU_GRANULE}-byte granules, length not 0, the end at most 4 GiB "
                         f"(0x{origin:X}, 0x{length:X})")
    return Region(origin, length)


def _inside(inner: Region, outer: Region) -> bool:
    return outer.origin <= inner.origin and inner.end <= outer.end


def trustzone_regions(board: Board) -> dict[str, Region]:
    """[trustzone]'s regions, checked against the board's memory."""
    where = f"{board.path} [trustzone]"
    if board.port != PORT or board.arch != "armv8.1-m":
        raise BoardError(f"{where}: TrustZone-M needs an Armv8-M board of the {PORT} port")
    table = tomllib.loads(board.path.read_text()).get("trustzone")
    if not isinstance(table, dict):
        raise BoardError(f"{board.path}: no [trustzone] table: this board has no Secure/"
                         f"Non-secure split (docs/trustzone.md)")
    unknown = sorted(set(table) - set(REGIONS))
    if unknown:
        raise BoardError(f"{where}: unknown key(s) {', '.join(unknown)}; known: "
                         f"{', '.join(REGIONS)}")
    regions = {key: _region(table, key, where) for key in REGIONS}
    nsc, code, ram = regions["nsc"], regions["ns_code"], regions["ns_ram"]
    if not (_inside(nsc, board.code) and _inside(code, board.code) and nsc.end <= code.origin):
        raise BoardError(f"{where}: nsc and ns_code must lie in [memory.code], nsc below "
                         f"ns_code (the Secure code ends where nsc begins)")
    if nsc.origin == board.code.origin:
        raise BoardError(f"{where}: nsc leaves no Secure code below it in [memory.code]")
    if ram.overlaps(board.ram) or ram.overlaps(board.weights) or ram.overlaps(board.code):
        raise BoardError(f"{where}: ns_ram must be clear of [memory.ram], [memory.code] and "
                         f"the weights (they stay Secure)")
    secure = (board.ram, board.weights, Region(board.code.origin, nsc.origin - board.code.origin))
    for key in ("ns_code", "ns_ram"):
        alias = Region(regions[key].origin ^ IDAU_ALIAS_BIT, regions[key].length)
        if any(alias.overlaps(region) for region in secure):
            raise BoardError(f"{where}: {key}'s other alias (address bit 28, the IDAU's) is "
                             f"Secure memory: the Non-secure side would reach it there")
    return regions


def _shown(board: Board) -> str:
    return f"Generated from {board.path.name} by colibri_tools.board.port_trustzone; do not edit."


def config_header(board: Board) -> str:
    regions = trustzone_regions(board)
    lines = [f"/* {_shown(board)} */", "#ifndef COLIBRI_TZ_CONFIG_H", "#define COLIBRI_TZ_CONFIG_H",
             ""]
    for key in REGIONS:
        region = regions[key]
        lines += [f"#define TZ_{key.upper()}_ADDR 0x{region.origin:08X}u",
                  f"#define TZ_{key.upper()}_SIZE 0x{region.length:X}u"]
    lines += [f"#define TZ_SECURE_RAM_ADDR 0x{board.ram.origin:08X}u /* [memory.ram]: Secure */"]
    return "\n".join([*lines, "", "#endif", ""])


def secure_ld(board: Board) -> str:
    """The Secure image's extra region: the veneers (ports/baremetal/trustzone/secure.ld)."""
    nsc = trustzone_regions(board)["nsc"]
    return "\n".join([f"/* {_shown(board)} */",
                      f"MEMORY {{ NSC (rx) : ORIGIN = 0x{nsc.origin:08X}, "
                      f"LENGTH = 0x{nsc.length:X} }}", ""])


def ns_memory_ld(board: Board) -> str:
    """The Non-secure image's MEMORY (ports/baremetal/trustzone/ns.ld)."""
    regions = trustzone_regions(board)
    code, ram = regions["ns_code"], regions["ns_ram"]
    return "\n".join([f"/* {_shown(board)} */", "MEMORY", "{",
                      f"    NS_CODE (rx) : ORIGIN = 0x{code.origin:08X}, LENGTH = 0x{code.length:X}",
                      f"    NS_RAM (rwx) : ORIGIN = 0x{ram.origin:08X}, LENGTH = 0x{ram.length:X}",
                      "}", ""])


RENDERERS = {"header": config_header, "ld-secure": secure_ld, "ld-ns": ns_memory_ld}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in RENDERERS:
        print(f"usage: python -m colibri_tools.board.port_trustzone {{{','.join(RENDERERS)}}} "
              f"BOARD [-o FILE]", file=sys.stderr)
        return 2
    return generator_main(f"colibri_tools.board.port_trustzone {argv[0]}", RENDERERS[argv[0]],
                          argv[1:])


if __name__ == "__main__":
    sys.exit(main())
