"""Signed model images (docs/format.md, section 8): an Ed25519 signature over
a signature block that follows the image bytes and holds the SHA-512 of each
block of the image. Signing needs the private key, so it happens here, on the
host, with the `cryptography` package; devices only verify (sdk/src/ota/signature.c).

    colibri-sign keygen -o keys/release            keys/release.pem (private, 0600) + .pub
    colibri-sign sign model.bin --key keys/release.pem --image-version 7 -o model.signed.bin
    colibri-sign verify model.signed.bin --pubkey keys/release.pub
    colibri-sign header keys/release.pub -o trusted_key.h    the key for firmware (C)
    colibri-sign hex keys/release.pub                        64 hex digits (colibri-run --trusted-key)

Library first: sign_image(), read_signature(), check_image(), load_private_key(),
load_public_key(), trusted_key_header(). The sign and verify commands run the
device's own image checks (check_image) first: no signature vouches for an
image colibri_init or colibri_verify would refuse.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import struct
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ..errors import ColibriError, ImageFormatError
from ..version import add_version_option
from .image_reader import ModelImage, read_image

# The block's layout: sdk/src/ota/signature_layout.h mirrors the same text
# (tests/tools/test_signing.py compares the two).
MAGIC = b"COLISIG\x1a"
IMAGE_MAGIC = b"COLIBRI\x1a"
HEADER_SIZE = 128
HASH_SIZE = 64
SIGNATURE_SIZE = 64
MIN_BLOCK_LOG2, MAX_BLOCK_LOG2, DEFAULT_BLOCK_LOG2 = 12, 24, 16
HASH_SHA512, ALG_ED25519 = 1, 1
# name -> (offset, struct format)
FIELDS = {
    "magic": (0, "8s"), "version_major": (8, "H"), "version_minor": (10, "H"),
    "fixed_size": (12, "I"), "image_size": (16, "Q"), "image_version": (24, "Q"),
    "block_log2": (32, "I"), "n_blocks": (36, "I"), "fingerprint": (40, "I"),
    "hash_alg": (44, "I"), "sign_alg": (48, "I"), "total_size": (52, "I"),
    "public_key": (56, "32s"), "reserved": (88, "40s"),
}


class SignatureError(ColibriError):
    """A signed image or key is wrong. `status` names the colibri_status the
    device reports for the same defect (colibri_signature_check)."""

    def __init__(self, message: str, *, status: str, path: str | Path | None = None) -> None:
        self.status = status
        super().__init__(f"{message} [{status}]", path=path)


class ImageCheckError(ColibriError):
    """The image itself (not its signature block) breaks docs/format.md: the
    device would refuse it. `status` names the colibri_status it would report."""

    def __init__(self, cause: ImageFormatError, *, path: str | Path | None = None) -> None:
        self.status = cause.status
        at = "" if cause.offset is None else f" (at offset {cause.offset})"
        super().__init__(f"{cause.status}: {cause.message.removesuffix(f' [{cause.status}]')}"
                         f"{at}; a device would refuse this image", path=path)


@dataclass(frozen=True)
class Signature:
    image_size: int
    image_version: int
    fingerprint: int
    block_size: int
    hashes: tuple[bytes, ...]
    public_key: bytes
    size: int                 # bytes of the signature block


def block_size_of(image_size: int, block_log2: int) -> int:
    n = -(-image_size // (1 << block_log2))
    return HEADER_SIZE + HASH_SIZE * n + SIGNATURE_SIZE


def raw_public(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _image_size(data: bytes, path: str | Path | None) -> int:
    if len(data) < 256:
        raise SignatureError(f"{len(data)} bytes: shorter than an image header",
                             status="COLIBRI_E_TRUNCATED", path=path)
    if data[:8] != IMAGE_MAGIC:
        raise SignatureError("not a Colibri model image", status="COLIBRI_E_BAD_MAGIC", path=path)
    size = struct.unpack_from("<Q", data, 16)[0]
    if size < 256 or size > len(data):
        raise SignatureError(f"the header says {size} bytes, the file has {len(data)}",
                             status="COLIBRI_E_TRUNCATED", path=path)
    return size


def unsigned_part(data: bytes, path: str | Path | None = None) -> bytes:
    """The image without its signature block (if any). Other bytes after the
    image are refused: they would be neither signed nor read."""
    size = _image_size(data, path)
    rest = data[size:]
    if rest and not rest.startswith(MAGIC):
        raise SignatureError(f"{len(rest)} unknown bytes after the image (not a signature block)",
                             status="COLIBRI_E_BAD_SIGNATURE_BLOCK", path=path)
    return data[:size]


def check_image(data: bytes | Path, path: str | Path | None = None) -> ModelImage:
    """Run the device's checks on an image: colibri_init's (read_image) and
    colibri_verify's (every tensor's data CRC-32 and scales). data: the file's
    bytes (a signature block after the image left aside) or a model.bin path
    (read in place). Raises ImageCheckError."""
    source = data if isinstance(data, Path) else unsigned_part(data, path)
    try:
        return read_image(source, verify_data=True)
    except ImageFormatError as exc:
        raise ImageCheckError(exc, path=path) from None


def sign_image(data: bytes, key: Ed25519PrivateKey, *, image_version: int = 0,
               block_log2: int = DEFAULT_BLOCK_LOG2, path: str | Path | None = None) -> bytes:
    """The image followed by its signature block (an old block is replaced)."""
    if not MIN_BLOCK_LOG2 <= block_log2 <= MAX_BLOCK_LOG2:
        raise ColibriError(f"block size 2^{block_log2}: must be 2^{MIN_BLOCK_LOG2} .. "
                           f"2^{MAX_BLOCK_LOG2} bytes")
    if not 0 <= image_version < 1 << 64:
        raise ColibriError(f"image version {image_version}: must be 0 .. 2^64-1")
    image = unsigned_part(data, path)
    bs = 1 << block_log2
    hashes = [hashlib.sha512(image[i:i + bs]).digest() for i in range(0, len(image), bs)]
    header = bytearray(HEADER_SIZE)
    values = {"magic": MAGIC, "version_major": 1, "version_minor": 0, "fixed_size": HEADER_SIZE,
              "image_size": len(image), "image_version": image_version, "block_log2": block_log2,
              "n_blocks": len(hashes), "fingerprint": struct.unpack_from("<I", image, 24)[0],
              "hash_alg": HASH_SHA512, "sign_alg": ALG_ED25519,
              "total_size": block_size_of(len(image), block_log2),
              "public_key": raw_public(key.public_key()), "reserved": bytes(40)}
    for name, (offset, fmt) in FIELDS.items():
        struct.pack_into("<" + fmt, header, offset, values[name])
    signed = bytes(header) + b"".join(hashes)
    return image + signed + key.sign(signed)


def _field(block: bytes, name: str):
    offset, fmt = FIELDS[name]
    return struct.unpack_from("<" + fmt, block, offset)[0]


def _check_layout(image: bytes, block: bytes, path) -> None:
    def bad(what: str) -> SignatureError:
        return SignatureError(f"signature block: {what}", status="COLIBRI_E_BAD_SIGNATURE_BLOCK",
                              path=path)

    if len(block) < HEADER_SIZE:
        raise bad(f"cut short ({len(block)} bytes after the image)")
    if (_field(block, "version_major") != 1 or _field(block, "hash_alg") != HASH_SHA512
            or _field(block, "sign_alg") != ALG_ED25519):
        raise SignatureError("signature block of an unknown version or algorithm",
                             status="COLIBRI_E_UNSUPPORTED_VERSION", path=path)
    log2 = _field(block, "block_log2")
    checks = [(_field(block, "fixed_size") == HEADER_SIZE, "fixed part is not 128 bytes"),
              (_field(block, "image_size") == len(image), "image size is not this image's"),
              (MIN_BLOCK_LOG2 <= log2 <= MAX_BLOCK_LOG2, f"block size 2^{log2} out of range"),
              (_field(block, "reserved") == bytes(40), "reserved bytes are not zero"),
              (_field(block, "fingerprint") == struct.unpack_from("<I", image, 24)[0],
               "fingerprint is not this image's")]
    for ok, what in checks:
        if not ok:
            raise bad(what)
    n = -(-len(image) // (1 << log2))
    if _field(block, "n_blocks") != n or _field(block, "total_size") != block_size_of(len(image), log2):
        raise bad("block count or size does not match the image")
    if len(block) < block_size_of(len(image), log2):
        raise bad("cut short")


def _meta_end(image: bytes) -> int:
    table, n = struct.unpack_from("<Q", image, 48)[0], struct.unpack_from("<I", image, 56)[0]
    end = table + 64 * n if table <= len(image) and 64 * n <= len(image) - table else len(image)
    return max(end, 256)


def read_signature(data: bytes, trusted_key: bytes | None = None, *, path: str | Path | None = None,
                   verify_data: bool = True) -> Signature:
    """Check the signature block after the image in `data` as the device does
    (colibri_signature_check, then every block's hash unless verify_data is
    False). trusted_key None: check against the block's own key."""
    size = _image_size(data, path)
    image, block = data[:size], data[size:]
    if not block.startswith(MAGIC):
        raise SignatureError("the image is not signed (no signature block after it)",
                             status="COLIBRI_E_UNSIGNED", path=path)
    _check_layout(image, block, path)
    log2 = _field(block, "block_log2")
    n = _field(block, "n_blocks")
    key = _field(block, "public_key")
    if trusted_key is not None and key != trusted_key:
        raise SignatureError(f"signed by key {key.hex()[:16]}..., not the trusted "
                             f"{trusted_key.hex()[:16]}...", status="COLIBRI_E_WRONG_KEY", path=path)
    signed_end = HEADER_SIZE + HASH_SIZE * n
    if not key_is_usable(key):
        raise SignatureError("the public key is not an Ed25519 point of full order",
                             status="COLIBRI_E_BAD_KEY", path=path)
    try:
        Ed25519PublicKey.from_public_bytes(key).verify(block[signed_end:signed_end + 64],
                                                       block[:signed_end])
    except InvalidSignature as exc:
        raise SignatureError("the signature does not verify", status="COLIBRI_E_SIGNATURE",
                             path=path) from exc
    hashes = tuple(block[HEADER_SIZE + HASH_SIZE * i:HEADER_SIZE + HASH_SIZE * (i + 1)]
                   for i in range(n))
    bs = 1 << log2
    last = n if verify_data else -(-_meta_end(image) // bs)
    for i in range(last):
        if hashlib.sha512(image[i * bs:(i + 1) * bs]).digest() != hashes[i]:
            raise SignatureError(f"block {i} (bytes {i * bs}..{min((i + 1) * bs, size)}) does not "
                                 f"match its signed hash", status="COLIBRI_E_HASH_MISMATCH", path=path)
    return Signature(size, _field(block, "image_version"), _field(block, "fingerprint"), bs, hashes,
                     key, block_size_of(size, log2))


_P = 2**255 - 19
_D = -121665 * pow(121666, _P - 2, _P) % _P


def _edwards_add(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    t = _D * a[0] * b[0] * a[1] * b[1] % _P
    return ((a[0] * b[1] + b[0] * a[1]) * pow(1 + t, _P - 2, _P) % _P,
            (a[1] * b[1] + a[0] * b[0]) * pow(1 - t, _P - 2, _P) % _P)


def key_is_usable(key: bytes) -> bool:
    """The device's rule for a public key (sdk/src/crypto/ed25519.c): it decodes as
    RFC 8032 5.1.3 says and is not of small order (8 A != identity)."""
    y = int.from_bytes(key, "little") & ((1 << 255) - 1)
    sign = key[31] >> 7
    if y >= _P:
        return False
    xx = (y * y - 1) * pow(_D * y * y + 1, _P - 2, _P) % _P
    x = pow(xx, (_P + 3) // 8, _P)
    if (x * x - xx) % _P:
        x = x * pow(2, (_P - 1) // 4, _P) % _P
    if (x * x - xx) % _P or (x == 0 and sign):
        return False
    point = (x if x & 1 == sign else _P - x, y)
    for _ in range(3):
        point = _edwards_add(point, point)
    return point != (0, 1)


def load_private_key(path: str | Path, password: bytes | None = None) -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(Path(path).read_bytes(), password)
    except (ValueError, TypeError) as exc:
        raise ColibriError(f"not a PEM private key (or a wrong password): {exc}", path=path) from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise ColibriError("not an Ed25519 private key", path=path)
    return key


def load_public_key(path: str | Path) -> bytes:
    """The raw 32 bytes of a PEM public key (or of a PEM private key's)."""
    text = Path(path).read_bytes()
    try:
        key = serialization.load_pem_public_key(text)
    except ValueError:
        return raw_public(load_private_key(path).public_key())
    if not isinstance(key, Ed25519PublicKey):
        raise ColibriError("not an Ed25519 public key", path=path)
    return raw_public(key)


def trusted_key_header(key: bytes | None, source: str) -> str:
    """colibri_trusted_key.h: the key firmware passes to colibri_signature_check
    (None: no key, COLIBRI_TRUSTED_KEY_PRESENT 0: unsigned images accepted)."""
    body = ", ".join(f"0x{b:02x}" for b in (key or bytes(32)))
    return "\n".join([
        f"/* Generated by colibri-sign from {source}; do not edit. */",
        "#ifndef COLIBRI_TRUSTED_KEY_H", "#define COLIBRI_TRUSTED_KEY_H", "",
        "/* The Ed25519 public key this firmware trusts (docs/ota.md). */",
        f"#define COLIBRI_TRUSTED_KEY_PRESENT {1 if key else 0}",
        f"#define COLIBRI_TRUSTED_KEY {{{body}}}", "", "#endif", ""])


def write_atomic(path: Path, data: bytes, mode: int = 0o644) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent or ".", prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _keygen(args) -> int:
    key = Ed25519PrivateKey.generate()
    base = Path(args.output)
    pem, pub = base.with_suffix(".pem"), base.with_suffix(".pub")
    if pem.exists() and not args.force:
        raise ColibriError("exists; refusing to overwrite a private key (--force)", path=pem)
    write_atomic(pem, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption()), mode=0o600)
    write_atomic(pub, key.public_key().public_bytes(serialization.Encoding.PEM,
                                                    serialization.PublicFormat.SubjectPublicKeyInfo))
    print(f"{pem} (private, keep it off devices), {pub}: {raw_public(key.public_key()).hex()}")
    return 0


def _sign(args) -> int:
    password = os.environb.get(args.password_env.encode()) if args.password_env else None
    key = load_private_key(args.key, password)
    if args.block_size <= 0 or args.block_size & (args.block_size - 1):
        raise ColibriError(f"--block-size {args.block_size} is not a power of two")
    data = Path(args.image).read_bytes()
    check_image(data, args.image)
    out = sign_image(data, key, image_version=args.image_version,
                     block_log2=args.block_size.bit_length() - 1, path=args.image)
    if Path(args.output).resolve() == Path(args.image).resolve() and not args.in_place:
        raise ColibriError("the output would replace the input (use --in-place)", path=args.output)
    write_atomic(Path(args.output), out)
    sig = read_signature(out, raw_public(key.public_key()), path=args.output)
    print(f"{args.output}: image {sig.image_size} bytes, version {sig.image_version}, "
          f"{len(sig.hashes)} blocks of {sig.block_size}, signature block {sig.size} bytes")
    return 0


def _verify(args) -> int:
    trusted = load_public_key(args.pubkey) if args.pubkey else None
    data = Path(args.image).read_bytes()
    sig = read_signature(data, trusted, path=args.image)
    check_image(data, args.image)
    how = "trusted key" if trusted else "its own key (integrity only: no --pubkey given)"
    print(f"{args.image}: signature good ({how}), version {sig.image_version}, "
          f"fingerprint 0x{sig.fingerprint:08X}, {len(sig.hashes)} blocks verified")
    return 0


def _header(args) -> int:
    if args.pubkey == "none":
        text = trusted_key_header(None, "no key (unsigned images accepted)")
    else:
        text = trusted_key_header(load_public_key(args.pubkey), Path(args.pubkey).name)
    out = Path(args.output) if args.output else None
    if out is None:
        sys.stdout.write(text)
    elif not out.exists() or out.read_text() != text:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    return 0


def _hex(args) -> int:
    print(load_public_key(args.pubkey).hex())
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="colibri-sign", description="Sign model images (Ed25519) and "
                                "check signed ones (docs/format.md section 8, docs/ota.md).")
    add_version_option(p)
    sub = p.add_subparsers(dest="cmd", required=True)
    k = sub.add_parser("keygen", help="make a key pair: OUT.pem (private) and OUT.pub")
    k.add_argument("-o", "--output", required=True)
    k.add_argument("--force", action="store_true")
    s = sub.add_parser("sign", help="append a signature block to a model image")
    s.add_argument("image")
    s.add_argument("--key", required=True, help="PEM private key (PKCS#8)")
    s.add_argument("--password-env", help="environment variable holding the key's password")
    s.add_argument("--image-version", type=int, default=0,
                   help="version number devices compare to refuse rollbacks (default 0)")
    s.add_argument("--block-size", type=int, default=1 << DEFAULT_BLOCK_LOG2,
                   help="bytes per hashed block, a power of two 4096 .. 16 MiB (default 65536)")
    s.add_argument("-o", "--output", required=True)
    s.add_argument("--in-place", action="store_true", help="allow -o to be the input")
    v = sub.add_parser("verify", help="check a signed image as a device would")
    v.add_argument("image")
    v.add_argument("--pubkey", help="the trusted public key (PEM)")
    h = sub.add_parser("header", help="the public key as a C header for firmware")
    h.add_argument("pubkey", help="PEM public key, or 'none'")
    h.add_argument("-o", "--output")
    x = sub.add_parser("hex", help="the public key as 64 hex digits (colibri-run --trusted-key)")
    x.add_argument("pubkey")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        commands = {"keygen": _keygen, "sign": _sign, "verify": _verify, "header": _header,
                    "hex": _hex}
        return commands[args.cmd](args)
    except (ColibriError, OSError) as exc:
        print(f"colibri-sign: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
