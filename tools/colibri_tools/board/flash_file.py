"""A flash's contents as a file, with a model image written to one of its
partitions: what Zephyr's flash simulator on native_sim keeps in its
--flash=FILE (docs/zephyr.md, "Experts from a flash partition"), and what a
programmer writes to an external NOR at the partition's offset.

    write_flash_file(out, image, offset=0x200000, flash_size=34 << 20)
    storage_partition(BUILD_DIR)  # from a Zephyr build: the partition and its flash

The bytes outside the image are the erased value (0xFF by default). The
image is checked first (colibri_tools.image.read_image: a model image,
whole); an image that does not fit the flash after `offset`, or the
partition, is refused. colibri-flash --build-dir B --flash-file F
--weights model.bin does both.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import ColibriError
from ..image.image_reader import read_image


class FlashFileError(ColibriError):
    """The image does not fit the flash at that offset, or the build has no
    storage partition."""


@dataclass(frozen=True)
class Partition:
    offset: int      # in its flash device
    size: int
    flash_size: int  # the flash device's size


@dataclass
class _Node:
    labels: list[str]
    parent: _Node | None
    props: dict[str, str]


_NODE = re.compile(r"^\s*((?:[\w-]+:\s*)*)([\w,.@+-]+|/)\s*\{")
_PROP = re.compile(r"^\s*([\w,.#+-]+)\s*=\s*(.*?);")


def _nodes(dts: str) -> list[_Node]:
    """Every node of a flattened zephyr.dts, with its labels and properties."""
    nodes, stack = [], []
    for line in dts.splitlines():
        line = line.split("/*")[0]
        if m := _NODE.match(line):
            node = _Node(re.findall(r"([\w-]+):", m[1]), stack[-1] if stack else None, {})
            nodes.append(node)
            stack.append(node)
        elif re.match(r"^\s*\};", line) and stack:
            stack.pop()
        elif (m := _PROP.match(line)) and stack:
            stack[-1].props[m[1]] = m[2]
    return nodes


def _cells(value: str) -> list[int]:
    return [int(v, 0) for v in re.findall(r"0x[0-9a-fA-F]+|\d+", value)]


def storage_partition(build_dir: str | Path) -> Partition:
    """The colibri,storage partition of a Zephyr build (docs/zephyr.md section
    9): the node the chosen property names, else the one labelled
    colibri_storage, read from BUILD/zephyr/zephyr.dts."""
    dts_path = Path(build_dir) / "zephyr" / "zephyr.dts"
    if not dts_path.is_file():
        raise FlashFileError("no zephyr/zephyr.dts: not a Zephyr build directory", path=build_dir)
    nodes = _nodes(dts_path.read_text())
    chosen = next((n.props.get("colibri,storage") for n in nodes if n.props.get("colibri,storage")),
                  "&colibri_storage")
    label = chosen.strip().lstrip("&")
    node = next((n for n in nodes if label in n.labels), None)
    flash = node.parent.parent if node and node.parent else None
    if node is None or flash is None or len(_cells(node.props.get("reg", ""))) != 2:
        raise FlashFileError("the build has no colibri,storage partition "
                             "(CONFIG_COLIBRI_STORAGE, docs/zephyr.md section 9)", path=dts_path)
    offset, size = _cells(node.props["reg"])
    flash_reg = _cells(flash.props.get("reg", ""))
    if len(flash_reg) != 2:
        raise FlashFileError(f"the partition's flash device ({', '.join(flash.labels)}) has no "
                             "size", path=dts_path)
    return Partition(offset, size, flash_reg[1])


def write_flash_file(out: str | Path, image: str | Path, *, offset: int, flash_size: int,
                     erase_value: int = 0xFF) -> Path:
    """Write `out`: flash_size bytes of erase_value with the model image at
    offset. Returns out."""
    data = Path(image).read_bytes()
    read_image(image)  # a whole, valid model image, or ImageFormatError
    if offset < 0 or flash_size <= 0 or offset + len(data) > flash_size:
        raise FlashFileError(f"the image ({len(data)} bytes) does not fit a flash of "
                             f"{flash_size} bytes at offset 0x{offset:X}", path=image)
    if not 0 <= erase_value <= 0xFF:
        raise FlashFileError(f"erase value {erase_value} is not a byte")
    out = Path(out)
    with out.open("wb") as f:
        f.write(bytes([erase_value]) * offset)
        f.write(data)
        f.write(bytes([erase_value]) * (flash_size - offset - len(data)))
    return out


def write_partition_file(out: str | Path, image: str | Path, build_dir: str | Path) -> Partition:
    """The flash file of a Zephyr build's storage flash with the image in its
    colibri,storage partition (native_sim: zephyr.exe --flash=out)."""
    part = storage_partition(build_dir)
    if Path(image).stat().st_size > part.size:
        raise FlashFileError(f"the image is larger than the colibri,storage partition "
                             f"({part.size} bytes)", path=image)
    write_flash_file(out, image, offset=part.offset, flash_size=part.flash_size)
    return part
