"""A flash's contents as a file, with a model image written to one of its
partitions: what Zephyr's flash simulator on native_sim keeps in its
--flash=FILE (docs/zephyr.md, "Experts from a flash partition"), and what a
programmer writes to an external NOR at the partition's offset.

    write_flash_file(out, image, offset=0x200000, flash_size=34 << 20)

The bytes outside the image are the erased value (0xFF by default). The
image is checked first (colibri_tools.image.read_image: a model image,
whole); an image that does not fit the flash after `offset` is refused.
"""
from __future__ import annotations

from pathlib import Path

from ..errors import ColibriError
from ..image.image_reader import read_image


class FlashFileError(ColibriError):
    """The image does not fit the flash at that offset."""


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
