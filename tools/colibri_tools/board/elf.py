"""The few parts of an ELF file the tools read, from untrusted bytes: class,
machine, entry point, the PT_LOAD segments, the ARM build attributes (which
CPU and architecture the code was built for) and the function symbols.
Every offset is checked against the file: a damaged or hostile file gives an
ElfError naming the file, never a struct.error or an endless loop.

Used by hex_firmware (a firmware's bytes for a HEX image) and board_check (is
it built for this board?)."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from ..errors import ColibriError

PT_LOAD = 1
SHT_SYMTAB = 2
SHT_ARM_ATTRIBUTES = 0x70000003
STT_FUNC = 2
ELF32_HEADER, ELF64_HEADER = 52, 64
ELF32_PHDR, ELF64_PHDR = 32, 56       # bytes of a program header entry
ELF32_SHDR, ELF64_SHDR = 40, 64       # bytes of a section header entry
TAG_CPU_NAME, TAG_CPU_ARCH = 5, 6     # ARM build attributes (ARM IHI 0045)


class ElfError(ColibriError):
    """An ELF file that cannot be read as one."""


@dataclass(frozen=True)
class Segment:
    index: int        # program header number
    offset: int       # of its bytes in the file
    vaddr: int        # where it runs
    paddr: int        # where it is loaded
    filesz: int
    memsz: int


@dataclass(frozen=True)
class ElfInfo:
    machine: int
    bits: int
    entry: int
    segments: tuple[Segment, ...]                 # PT_LOAD with memsz > 0, in file order
    cpu_name: str | None = None                   # Tag_CPU_name
    cpu_arch: int | None = None                   # Tag_CPU_arch
    symbols: tuple[tuple[int, int, str], ...] = ()  # (address, size, name) of functions


def is_elf(data: bytes) -> bool:
    return data[:4] == b"\x7fELF"


def _program_headers(data: bytes, wide: bool, path) -> tuple[int, list[Segment]]:
    if wide:
        entry, phoff = struct.unpack_from("<QQ", data, 24)
        phentsize, phnum = struct.unpack_from("<HH", data, 54)
        fmt, need = "<IIQQQQQQ", ELF64_PHDR
    else:
        entry, phoff = struct.unpack_from("<II", data, 24)
        phentsize, phnum = struct.unpack_from("<HH", data, 42)
        fmt, need = "<IIIIIIII", ELF32_PHDR
    if phnum and phentsize < need:
        raise ElfError(f"program header entries of {phentsize} bytes (at least {need})", path=path)
    segments = []
    for i in range(phnum):
        at = phoff + i * phentsize
        if at + need > len(data):
            raise ElfError(f"program header {i} lies past the end of the file", path=path,
                           offset=at)
        row = struct.unpack_from(fmt, data, at)
        if wide:
            kind, _, offset, vaddr, paddr, filesz, memsz, _ = row
        else:
            kind, offset, vaddr, paddr, filesz, memsz, _, _ = row
        if kind != PT_LOAD or memsz == 0 and filesz == 0:
            continue
        if offset + filesz > len(data):
            raise ElfError(f"segment {i} lies past the end of the file", path=path, offset=offset)
        segments.append(Segment(i, offset, vaddr, paddr, filesz, memsz))
    return entry, segments


def _sections(data: bytes, wide: bool) -> list[tuple[int, int, int, int]]:
    """(type, offset, size, link) of every section header inside the file;
    sections whose bytes lie outside it are left out."""
    if wide:
        shoff, = struct.unpack_from("<Q", data, 40)
        shentsize, shnum = struct.unpack_from("<HH", data, 58)
        fmt, need, fields = "<IIQQQQI", ELF64_SHDR, (1, 4, 5, 6)
    else:
        shoff, = struct.unpack_from("<I", data, 32)
        shentsize, shnum = struct.unpack_from("<HH", data, 46)
        fmt, need, fields = "<IIIIIII", ELF32_SHDR, (1, 4, 5, 6)
    if shentsize < need:
        return []
    out = []
    for i in range(shnum):
        at = shoff + i * shentsize
        if at + need > len(data):
            break
        row = struct.unpack_from(fmt, data, at)
        kind, offset, size, link = (row[k] for k in fields)
        out.append((kind, offset, size, link) if offset + size <= len(data) else (0, 0, 0, 0))
    return out


def _uleb(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while pos < len(data) and shift < 64:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    return value, pos


def _cstring(data: bytes, pos: int) -> tuple[str, int]:
    end = data.find(b"\0", pos)
    end = len(data) if end < 0 else end
    return data[pos:end].decode("ascii", "replace"), end + 1


def arm_attributes(attrs: bytes) -> tuple[str | None, int | None]:
    """(Tag_CPU_name, Tag_CPU_arch) of the "aeabi" file attributes of an
    .ARM.attributes section's bytes."""
    name = arch = None
    if attrs[:1] != b"A":
        return name, arch
    vendor, pos = _cstring(attrs, 5)
    if vendor != "aeabi" or attrs[pos:pos + 1] != b"\x01":      # Tag_File
        return name, arch
    pos += 5
    while pos < len(attrs):
        tag, pos = _uleb(attrs, pos)
        if tag in (4, TAG_CPU_NAME, 67):                          # text-valued tags
            text, pos = _cstring(attrs, pos)
            name = text if tag == TAG_CPU_NAME else name
        else:
            value, pos = _uleb(attrs, pos)
            arch = value if tag == TAG_CPU_ARCH else arch
    return name, arch


def _symbols(data: bytes, wide: bool, sections) -> tuple[tuple[int, int, str], ...]:
    out = []
    size_of = 24 if wide else 16
    for kind, offset, size, link in sections:
        if kind != SHT_SYMTAB or link >= len(sections):
            continue
        strtab = sections[link][1]
        for at in range(offset, offset + size - size_of + 1, size_of):
            if wide:
                name, info, _, _, value, sym_size = struct.unpack_from("<IBBHQQ", data, at)
            else:
                name, value, sym_size, info = struct.unpack_from("<IIIB", data, at)
            if info & 0xF == STT_FUNC and value:
                out.append((value & ~1, sym_size, _cstring(data, strtab + name)[0]))
    return tuple(sorted(out))


def parse_elf(data: bytes, path: str | Path | None = None) -> ElfInfo:
    """Read an ELF file's bytes (little-endian ELF32 or ELF64)."""
    if not is_elf(data):
        raise ElfError("not an ELF file", path=path)
    if len(data) < ELF32_HEADER or data[4] not in (1, 2) or data[5] != 1:
        raise ElfError("only little-endian ELF32/ELF64 firmware is supported", path=path)
    wide = data[4] == 2
    if wide and len(data) < ELF64_HEADER:
        raise ElfError(f"ELF64 header cut short ({len(data)} of {ELF64_HEADER} bytes)", path=path)
    machine, = struct.unpack_from("<H", data, 18)
    entry, segments = _program_headers(data, wide, path)
    sections = _sections(data, wide)
    name = arch = None
    for kind, offset, size, _ in sections:
        if kind == SHT_ARM_ATTRIBUTES:
            name, arch = arm_attributes(data[offset:offset + size])
    return ElfInfo(machine, 64 if wide else 32, entry, tuple(segments), name, arch,
                   _symbols(data, wide, sections))


def read_elf(path: str | Path) -> ElfInfo | None:
    """The ELF file at path, or None if the file is not ELF."""
    data = Path(path).read_bytes()
    return parse_elf(data, path) if is_elf(data) else None
