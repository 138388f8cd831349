"""Signed images: the signature block after the image (docs/format.md,
section 8), written by colibri_tools.image.signing (the `cryptography` package) and
checked by the core (colibri_signature_check / _verify_blocks). Each broken
block gets its own status, the same from the C and the Python reader."""
from __future__ import annotations

import struct
import subprocess

import pytest
from colibri_tools.image import signing
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

OK, BAD_MAGIC, UNSUPPORTED_VERSION, TRUNCATED = 0, 2, 3, 4
SIGNATURE, BAD_KEY, UNSIGNED, BAD_BLOCK, HASH_MISMATCH, WRONG_KEY = 20, 21, 22, 23, 24, 25
KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
OTHER = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))
PUB = signing.raw_public(KEY.public_key())
IDENTITY_POINT = (1).to_bytes(32, "little")


@pytest.fixture(scope="module")
def signed(valid_image):
    return signing.sign_image(valid_image.read_bytes(), KEY, image_version=7, block_log2=12)


def c_check(asan_bins, path, key: bytes | None) -> dict[str, int]:
    out = subprocess.run([str(asan_bins / "crypto_probe")], input=f"image {path} "
                         f"{key.hex() if key else '-'}\n", capture_output=True, text=True,
                         timeout=120, check=True).stdout
    return {k: int(v) for k, v in (w.split("=") for w in out.split())}


def field(name: str) -> tuple[int, str]:
    return signing.FIELDS[name]


def edit_block(data: bytes, name: str, value) -> bytes:
    out = bytearray(data)
    size = struct.unpack_from("<Q", data, 16)[0]
    offset, fmt = field(name)
    struct.pack_into("<" + fmt, out, size + offset, value)
    return bytes(out)


def flip_at(data: bytes, offset: int) -> bytes:
    out = bytearray(data)
    out[offset] ^= 0x01
    return bytes(out)


def broken_cases(signed: bytes, plain: bytes) -> list[tuple[str, bytes, bytes | None, int]]:
    size = len(plain)
    n = struct.unpack_from("<I", signed, size + 36)[0]
    sig_at = size + 128 + 64 * n
    resigned_other = signing.sign_image(plain, OTHER, image_version=7, block_log2=12)
    return [
        ("not an image", b"\0" * 300, PUB, BAD_MAGIC),
        ("image cut short", plain[:-1], PUB, TRUNCATED),
        ("unsigned", plain, PUB, UNSIGNED),
        ("garbage after the image", plain + b"garbage!" * 40, PUB, UNSIGNED),
        ("block cut to 100 bytes", signed[:size + 100], PUB, BAD_BLOCK),
        ("block without its last byte", signed[:-1], PUB, BAD_BLOCK),
        ("unknown major version", edit_block(signed, "version_major", 2), PUB, UNSUPPORTED_VERSION),
        ("unknown hash", edit_block(signed, "hash_alg", 2), PUB, UNSUPPORTED_VERSION),
        ("unknown signature algorithm", edit_block(signed, "sign_alg", 0), PUB, UNSUPPORTED_VERSION),
        ("fixed part not 128", edit_block(signed, "fixed_size", 129), PUB, BAD_BLOCK),
        ("image size not this image's", edit_block(signed, "image_size", size + 64), PUB, BAD_BLOCK),
        ("block size 2^11", edit_block(signed, "block_log2", 11), PUB, BAD_BLOCK),
        ("block size 2^25", edit_block(signed, "block_log2", 25), PUB, BAD_BLOCK),
        ("block count + 1", edit_block(signed, "n_blocks", n + 1), PUB, BAD_BLOCK),
        ("total size + 64", edit_block(signed, "total_size", 192 + 64 * n + 64), PUB, BAD_BLOCK),
        ("reserved not zero", edit_block(signed, "reserved", b"\1" + bytes(39)), PUB, BAD_BLOCK),
        ("fingerprint of another image", edit_block(signed, "fingerprint", 0x12345678), PUB,
         BAD_BLOCK),
        ("signed by another key", resigned_other, PUB, WRONG_KEY),
        ("key swapped, own key trusted", edit_block(signed, "public_key",
                                                    signing.raw_public(OTHER.public_key())), None,
         SIGNATURE),
        ("key of small order", edit_block(signed, "public_key", IDENTITY_POINT), None, BAD_KEY),
        ("signature bit flipped", flip_at(signed, sig_at + 5), PUB, SIGNATURE),
        ("S bit flipped", flip_at(signed, sig_at + 40), PUB, SIGNATURE),
        ("image version changed", edit_block(signed, "image_version", 8), PUB, SIGNATURE),
        ("a block hash changed", flip_at(signed, size + 128 + 64 * (n - 1)), PUB, SIGNATURE),
        ("header byte changed, CRC not fixed", flip_at(signed, 200), PUB, HASH_MISMATCH),
    ]


def test_signed_image_checks_in_c_and_python(asan_bins, signed, tmp_path):
    path = tmp_path / "signed.bin"
    path.write_bytes(signed)
    assert c_check(asan_bins, path, PUB) == {"check": OK, "blocks": OK, "bad": -1, "version": 7}
    sig = signing.read_signature(signed, PUB)
    assert sig.image_version == 7 and sig.block_size == 4096 and sig.public_key == PUB
    assert len(signed) == sig.image_size + sig.size
    # the signature block is after image_size: the image itself is unchanged
    # and an older reader (colibri_init, colibri-run) never sees it
    assert signing.unsigned_part(signed) == signed[:sig.image_size]
    # signing again replaces the block
    again = signing.sign_image(signed, OTHER, image_version=9, block_log2=16)
    assert signing.read_signature(again).image_version == 9
    assert len(again) == sig.image_size + signing.block_size_of(sig.image_size, 16)


def test_each_broken_block_has_its_status(asan_bins, signed, valid_image, tmp_path):
    plain = valid_image.read_bytes()
    for name, data, key, status in broken_cases(signed, plain):
        path = tmp_path / "case.bin"
        path.write_bytes(data)
        assert c_check(asan_bins, path, key)["check"] == status, name
        with pytest.raises(signing.SignatureError) as caught:
            signing.read_signature(data, key)
        assert caught.value.status == signing_status(status), name


def signing_status(number: int) -> str:
    from colibri_tools.image.status import Status
    return Status(number).c_name


def test_tampered_data_is_found_block_by_block(asan_bins, signed, valid_image, tmp_path):
    """A changed weight byte leaves header, tables and signature intact: the
    check passes and the block holding the byte fails."""
    plain = valid_image.read_bytes()
    offset = len(plain) - 100           # inside the last tensor
    data = flip_at(signed, offset)
    path = tmp_path / "tampered.bin"
    path.write_bytes(data)
    assert c_check(asan_bins, path, PUB) == {"check": OK, "blocks": HASH_MISMATCH,
                                             "bad": offset // 4096, "version": 7}
    with pytest.raises(signing.SignatureError, match=f"block {offset // 4096} "):
        signing.read_signature(data, PUB)
    assert signing.read_signature(data, PUB, verify_data=False).image_version == 7


def test_layout_constants_equal_the_c_header():
    import pathlib
    import re
    text = (pathlib.Path(__file__).resolve().parents[2] / "sdk/src/ota/signature_layout.h").read_text()
    c = {m[0]: int(m[1]) for m in re.findall(r"SIG_(\w+) = (\d+)", text)}
    for name, (offset, _) in signing.FIELDS.items():
        if name != "magic":
            assert c[name.upper()] == offset, name
    assert c["RESERVED_SIZE"] == 40
    assert '"COLISIG\\x1a"' in text and signing.MAGIC == b"COLISIG\x1a"


def corrupt_images(plain: bytes) -> dict[str, bytes]:
    """One metadata byte (the meta CRC-32 left as it was) and one data byte
    (inside the last tensor, its data CRC-32 left as it was) changed."""
    return {"metadata": flip_at(plain, 68),               # hidden_size, in the model record
            "data": flip_at(plain, len(plain) - 100)}


def test_sign_and_verify_refuse_an_image_the_device_would_refuse(valid_image, tmp_path, capsys):
    """colibri-sign runs colibri_init's and colibri_verify's checks (the Python
    reader) before it signs or calls a signature good (issue 25): a signature
    never vouches for an image the device refuses."""
    from cryptography.hazmat.primitives import serialization

    pem, pub = tmp_path / "k.pem", tmp_path / "k.pub"
    pem.write_bytes(KEY.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
    pub.write_bytes(KEY.public_key().public_bytes(serialization.Encoding.PEM,
                                                  serialization.PublicFormat.SubjectPublicKeyInfo))
    plain = valid_image.read_bytes()
    for what, data in corrupt_images(plain).items():
        image, out = tmp_path / f"{what}.bin", tmp_path / f"{what}.signed.bin"
        image.write_bytes(data)
        assert signing.main(["sign", str(image), "--key", str(pem), "-o", str(out)]) == 1, what
        err = capsys.readouterr().err
        assert f"{image}: COLIBRI_E_CHECKSUM: " in err, err
        assert not out.exists(), what
        # signed anyway (the library does not refuse: device tests need such
        # images): the signature verifies, the image does not
        out.write_bytes(signing.sign_image(data, KEY, image_version=1))
        assert signing.main(["verify", str(out), "--pubkey", str(pub)]) == 1, what
        captured = capsys.readouterr()
        assert f"{out}: COLIBRI_E_CHECKSUM: " in captured.err and "good" not in captured.out
    good = tmp_path / "good.signed.bin"
    image = tmp_path / "good.bin"
    image.write_bytes(plain)
    assert signing.main(["sign", str(image), "--key", str(pem), "-o", str(good)]) == 0
    assert signing.main(["verify", str(good), "--pubkey", str(pub)]) == 0
    assert "signature good" in capsys.readouterr().out
    with pytest.raises(signing.ImageCheckError) as caught:
        signing.check_image(corrupt_images(plain)["metadata"], "m.bin")
    assert caught.value.status == "COLIBRI_E_CHECKSUM"
