"""The core's SHA-512 and Ed25519 verifier (sdk/src/crypto/sha512.c, ed25519.c,
field25519.c) against the standard vectors (FIPS 180-4 examples, RFC 8032
section 7.1), against OpenSSL (hashlib, and signatures made with the
`cryptography` package), and against the refusals RFC 8032 5.1.7 asks for:
S >= L, encodings that are not points, points of small order; one flipped
bit anywhere in the signature, key or message."""
from __future__ import annotations

import hashlib
import random
import subprocess

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

OK, SIGNATURE, BAD_KEY = 0, 20, 21
P = 2**255 - 19
L = 2**252 + 27742317777372353535851937790883648493
D = -121665 * pow(121666, P - 2, P) % P

# FIPS 180-4 / NIST CSRC examples: SHA-512 of "abc", of the 896-bit
# two-block message, and of one million "a".
NIST_SHA512 = [
    (b"abc", 1, "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a"
                "2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"),
    (b"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopq"
     b"klmnopqrlmnopqrsmnopqrstnopqrstu", 1,
     "8e959b75dae313da8cf4f72814fc143f8f7779c6eb9f7fa17299aeadb6889018"
     "501d289e4900f7e4331b99dec4b5433ac7d329eeb6dd26545e96e55b874be909"),
    (b"a", 1_000_000, "e718483d0ce769644e2e42c7bc15b4638e1f98b13b2044285632a803afa973eb"
                      "de0ff244877ea60a4cb0432ce577c31beb009c5c2c49aa2e4eadb217ad8cc09b"),
]

# RFC 8032, 7.1: TEST 1, TEST 2, TEST 3, TEST SHA(abc): secret key, public
# key, message, signature.
RFC8032 = [
    ("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
     "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
     "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
     "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"),
    ("4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
     "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
     "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da"
     "085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"),
    ("c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
     "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
     "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac"
     "18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"),
    ("833fe62409237b9d62ec77587520911e9a759cec1d19755b7da901b96dca3d42",
     "ec172b93ad5e563bf4932c70e1245034c35467ef2efd4d64ebf819683467e2bf",
     hashlib.sha512(b"abc").hexdigest(),
     "dc2a4459e7369633a52b1bf277839a00201009a3efbf3ecb69bea2186c26b589"
     "09351fc9ac90b3ecfdfbc7c66431e0303dca179c138ac17ad9bef1177331a704"),
]


class Probe:
    def __init__(self, path):
        self.proc = subprocess.Popen([str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)

    def ask(self, *words) -> str:
        self.proc.stdin.write(" ".join(str(w) for w in words) + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def verify(self, sig: bytes, key: bytes, msg: bytes) -> int:
        return int(self.ask("verify", sig.hex(), key.hex(), msg.hex() or "-"))

    def close(self):
        self.proc.stdin.close()
        assert self.proc.wait(timeout=60) == 0


@pytest.fixture(scope="module")
def probe(asan_bins):
    p = Probe(asan_bins / "crypto_probe")
    yield p
    p.close()


def test_sha512_nist_examples(probe):
    for message, repeat, digest in NIST_SHA512:
        assert hashlib.sha512(message * repeat).hexdigest() == digest   # the vector itself
        command = ("sha512", message.hex()) if repeat == 1 else ("sha512r", message.hex(), repeat)
        assert probe.ask(*command) == digest
    assert probe.ask("sha512", "-") == hashlib.sha512(b"").hexdigest()


def test_sha512_every_length_around_the_block_size(probe):
    rng = random.Random(7)
    lengths = list(range(0, 300)) + [n + d for n in (1024, 4096, 65536) for d in (-1, 0, 1)]
    for n in lengths:
        data = rng.randbytes(n)
        assert probe.ask("sha512", data.hex() or "-") == hashlib.sha512(data).hexdigest(), n
    data = rng.randbytes(1000)
    assert probe.ask("sha512r", data.hex(), 7) == hashlib.sha512(data * 7).hexdigest()


def test_rfc8032_vectors(probe):
    for _, key, msg, sig in RFC8032:
        assert probe.verify(bytes.fromhex(sig), bytes.fromhex(key), bytes.fromhex(msg)) == OK
    # the vectors are what OpenSSL computes from the secret keys
    for secret, key, msg, sig in RFC8032:
        private = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(secret))
        assert raw_public(private).hex() == key
        assert private.sign(bytes.fromhex(msg)).hex() == sig


def raw_public(private: Ed25519PrivateKey) -> bytes:
    return private.public_key().public_bytes(serialization.Encoding.Raw,
                                             serialization.PublicFormat.Raw)


def test_signatures_made_by_openssl_verify(probe):
    rng = random.Random(11)
    for i in range(40):
        private = Ed25519PrivateKey.generate()
        msg = rng.randbytes(rng.choice([0, 1, 63, 64, 127, 128, 129, 1023, 4000]) + i % 3)
        sig = private.sign(msg)
        assert probe.verify(sig, raw_public(private), msg) == OK
        other = raw_public(Ed25519PrivateKey.generate())
        assert probe.verify(sig, other, msg) == SIGNATURE


def flip(data: bytes, bit: int) -> bytes:
    out = bytearray(data)
    out[bit // 8] ^= 1 << (bit % 8)
    return bytes(out)


def test_flipped_bits_are_refused(probe):
    """Every third bit of the signature and the key (every bit: 11 s under
    ASan; the stride keeps both halves of R and S and every byte), and bits
    of the message."""
    _, key, msg, sig = (bytes.fromhex(x) for x in RFC8032[2])
    for bit in range(0, 512, 3):
        assert probe.verify(flip(sig, bit), key, msg) in (SIGNATURE, BAD_KEY), f"signature bit {bit}"
    for bit in range(1, 256, 3):
        # a flipped key bit gives another point (20), or no point at all (21)
        assert probe.verify(sig, flip(key, bit), msg) in (SIGNATURE, BAD_KEY), f"key bit {bit}"
    for bit in range(16):
        assert probe.verify(sig, key, flip(msg, bit)) == SIGNATURE, f"message bit {bit}"
    assert probe.verify(sig, key, msg + b"\0") == SIGNATURE
    assert probe.verify(sig, key, msg[:1]) == SIGNATURE


def test_non_canonical_s_is_refused(probe):
    """S + L verifies the group equation (L B = identity) but is not canonical."""
    for _, key, msg, sig in RFC8032:
        sig, key, msg = bytes.fromhex(sig), bytes.fromhex(key), bytes.fromhex(msg)
        s = int.from_bytes(sig[32:], "little")
        assert probe.verify(sig[:32] + (s + L).to_bytes(32, "little"), key, msg) == SIGNATURE
    sig, key = bytes.fromhex(RFC8032[0][3]), bytes.fromhex(RFC8032[0][1])
    assert probe.verify(sig[:32] + L.to_bytes(32, "little"), key, b"") == SIGNATURE
    assert probe.verify(sig[:32] + b"\xff" * 32, key, b"") == SIGNATURE


# A reference of the curve, only to find its small-order points.
def _add(p1, p2):
    (x1, y1), (x2, y2) = p1, p2
    t = D * x1 * x2 * y1 * y2 % P
    return ((x1 * y2 + x2 * y1) * pow(1 + t, P - 2, P) % P,
            (y1 * y2 + x1 * x2) * pow(1 - t, P - 2, P) % P)


def _mul(k, pt):
    out = (0, 1)
    while k:
        if k & 1:
            out = _add(out, pt)
        pt = _add(pt, pt)
        k >>= 1
    return out


def _x_for(y):
    xx = (y * y - 1) * pow(D * y * y + 1, P - 2, P) % P
    x = pow(xx, (P + 3) // 8, P)
    if (x * x - xx) % P:
        x = x * pow(2, (P - 1) // 4, P) % P
    return x if (x * x - xx) % P == 0 else None


def _encode(pt):
    x, y = pt
    return (y | (x & 1) << 255).to_bytes(32, "little")


def small_order_points():
    found, y = set(), 2
    while len(found) < 8:
        x = _x_for(y)
        if x is not None:
            found.add(_mul(L, (x, y)))
        y += 1
    return sorted(found)


def test_small_order_points_are_refused(probe):
    points = small_order_points()
    assert len(points) == 8 and (0, 1) in points
    identity = _encode((0, 1))
    for pt in points:
        enc = _encode(pt)
        # as the key: with R = identity and S = 0 the cofactorless equation
        # [S]B = R + [k]A holds for the identity key; refused as a key
        assert probe.verify(identity + bytes(32), enc, b"msg") == BAD_KEY, enc.hex()
        # as R, with a good key
        _, key, msg, sig = (bytes.fromhex(x) for x in RFC8032[1])
        assert probe.verify(enc + sig[32:], key, msg) == SIGNATURE, enc.hex()


def test_encodings_that_are_not_points_are_refused(probe):
    sig, key = bytes.fromhex(RFC8032[0][3]), bytes.fromhex(RFC8032[0][1])
    y_equal_p = (P).to_bytes(32, "little")                  # y >= p
    y_p_plus_1 = (P + 1).to_bytes(32, "little")             # y = 1 non-canonically
    x_zero_sign = (1 | 1 << 255).to_bytes(32, "little")     # x = 0 with the sign bit set
    no_root = next(y for y in range(2, 100) if _x_for(y) is None).to_bytes(32, "little")
    for bad in (y_equal_p, y_p_plus_1, x_zero_sign, no_root):
        assert probe.verify(sig, bad, b"") == BAD_KEY, bad.hex()
        assert probe.verify(bad + sig[32:], key, b"") == SIGNATURE, bad.hex()
