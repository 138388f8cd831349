"""A minimal flattened device tree (DTB) reader, enough to check a board file
against the device tree QEMU generates (`-M virt,dumpdtb=FILE`).

Format: Devicetree Specification v0.4, chapter 5. Big-endian header; the
structure block is a token stream (BEGIN_NODE name, PROP len nameoff value,
END_NODE, NOP, END) whose property names live in the strings block.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

FDT_MAGIC = 0xD00DFEED
FDT_BEGIN_NODE, FDT_END_NODE, FDT_PROP, FDT_NOP, FDT_END = 1, 2, 3, 4, 9


@dataclass
class Node:
    path: str
    props: dict[str, bytes] = field(default_factory=dict)

    def cells(self, name: str) -> list[int]:
        """A property as big-endian 32-bit cells."""
        raw = self.props[name]
        return list(struct.unpack(f">{len(raw) // 4}I", raw))

    def strings(self, name: str) -> list[str]:
        return [s.decode() for s in self.props.get(name, b"").split(b"\0") if s]


def _align4(offset: int) -> int:
    return (offset + 3) & ~3


def read_dtb(blob: bytes) -> dict[str, Node]:
    """Every node of the tree by path ("/", "/pl011@9000000", ...)."""
    magic, _size, off_struct, off_strings = struct.unpack_from(">4I", blob, 0)
    if magic != FDT_MAGIC:
        raise ValueError(f"not a DTB (magic 0x{magic:08X})")
    nodes: dict[str, Node] = {}
    stack: list[str] = []
    pos = off_struct
    while True:
        (token,) = struct.unpack_from(">I", blob, pos)
        pos += 4
        if token == FDT_BEGIN_NODE:
            end = blob.index(b"\0", pos)
            name = blob[pos:end].decode()
            pos = _align4(end + 1)
            path = "/" if not stack else (stack[-1].rstrip("/") + "/" + name)
            stack.append(path)
            nodes[path] = Node(path)
        elif token == FDT_END_NODE:
            stack.pop()
        elif token == FDT_PROP:
            length, name_off = struct.unpack_from(">2I", blob, pos)
            pos += 8
            name_end = blob.index(b"\0", off_strings + name_off)
            name = blob[off_strings + name_off:name_end].decode()
            nodes[stack[-1]].props[name] = blob[pos:pos + length]
            pos = _align4(pos + length)
        elif token == FDT_NOP:
            continue
        elif token == FDT_END:
            return nodes
        else:
            raise ValueError(f"bad DTB token {token} at offset {pos - 4}")


def find_compatible(nodes: dict[str, Node], compatible: str) -> list[Node]:
    return [n for n in nodes.values() if compatible in n.strings("compatible")]
