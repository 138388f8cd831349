"""Images for the A/B slot tests: OLD, and NEW = OLD with some weights
changed (same shape, new data CRCs and fingerprint), both signed; NEW also
signed by another key and unsigned. Written on their own from docs/format.md
offsets (no converter), so the slot tests need no PyTorch."""
from __future__ import annotations

import pathlib
import struct
import zlib

from colibri_tools.image import signing
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
OTHER_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))
PUBLIC = signing.raw_public(KEY.public_key())


def retrained(plain: bytes, factor: float = 0.5) -> bytes:
    """The image with its last tensor's values scaled: new data CRC, new meta
    CRC (fingerprint)."""
    img = bytearray(plain)
    table, n = struct.unpack_from("<QI", img, 48)
    entry = table + 64 * (n - 1)
    offset, size = struct.unpack_from("<QQ", img, entry + 32)
    values = struct.unpack_from(f"<{size // 4}f", img, offset)
    struct.pack_into(f"<{size // 4}f", img, offset, *(v * factor for v in values))
    struct.pack_into("<I", img, entry + 28, zlib.crc32(bytes(img[offset:offset + size])))
    end = table + 64 * n
    struct.pack_into("<I", img, 24, zlib.crc32(bytes(img[:24]) + bytes(4) + bytes(img[28:end])))
    return bytes(img)


def write_update_images(plain: bytes, out: pathlib.Path) -> dict[str, pathlib.Path]:
    out.mkdir(parents=True, exist_ok=True)
    new = retrained(plain)
    files = {"old": signing.sign_image(plain, KEY, image_version=1, block_log2=12),
             "new": signing.sign_image(new, KEY, image_version=2, block_log2=12),
             "other": signing.sign_image(new, OTHER_KEY, image_version=2, block_log2=12),
             "unsigned": new}
    paths = {}
    for name, data in files.items():
        paths[name] = out / f"{name}.bin"
        paths[name].write_bytes(data)
    return paths
