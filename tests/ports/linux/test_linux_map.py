"""colibri_linux_map through colibri-run: files that are not a usable model
image are refused with a clear message and exit 1, never a crash; the same
cases run under AddressSanitizer/UBSan. Also --mlock against RLIMIT_MEMLOCK,
--verify on corrupt data and the shared flock."""

from __future__ import annotations

import ctypes
import fcntl
import os
import resource
import struct
import subprocess
import sys

import pytest
from linux_helpers import assert_clean_failure, assert_no_sanitizer_report, run

MAGIC = b"COLIBRI\x1a"
PR_CAPBSET_DROP = 24                                  # prctl(2)
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_IPC_LOCK = 1, 2, 14


def _header(image_size: int, total: int) -> bytes:
    head = bytearray(total)
    head[0:8] = MAGIC
    struct.pack_into("<HHIQ", head, 8, 1, 0, 256, image_size)
    return bytes(head)


def make_bad_file(kind: str, where, image: bytes):
    """Create the bad input `kind` under `where`; return its path."""
    path = where / f"{kind}.bin"
    if kind == "missing":
        return path
    if kind == "directory":
        path.mkdir()
        return path
    if kind == "fifo":
        os.mkfifo(path)
        return path
    contents = {
        "empty": b"",
        "tiny": b"COLIBRI",
        "under_header": MAGIC + bytes(247),                       # 255 bytes
        "not_an_image": b"\x7fELF" + bytes(4092),
        "text": b"hello, world\n" * 100,
        "truncated": image[: len(image) // 2],
        "header_only": image[:256],
        "claims_larger": _header(1 << 40, 4096),
        "claims_one_more": _header(4097, 4096),
        "bad_header": _header(4096, 4096),                         # tables make no sense
    }[kind]
    path.write_bytes(contents)
    return path


BAD_FILES = [
    ("missing", 1, ["cannot open the model file: No such file or directory"]),
    ("directory", 1, ["is a directory, not a model image file"]),
    ("fifo", 1, ["is a FIFO, not a model image file"]),
    ("empty", 1, ["the file is empty (0 bytes)"]),
    ("tiny", 1, ["the file is 7 bytes, smaller than the 256-byte model image header"]),
    ("under_header", 1, ["the file is 255 bytes, smaller than the 256-byte"]),
    ("not_an_image", 1, ["not a Colibri model image"]),
    ("text", 1, ["not a Colibri model image"]),
    ("truncated", 1, ["the file is truncated: its header says the image is"]),
    ("header_only", 1, ["the file is truncated"]),
    ("claims_larger", 1, [f"says the image is {1 << 40} bytes but the file has only 4096"]),
    ("claims_one_more", 1, ["says the image is 4097 bytes but the file has only 4096"]),
    ("bad_header", 1, ["cannot load the model image:", "(status "]),
]


@pytest.mark.parametrize("kind,status,phrases", BAD_FILES, ids=[k for k, _, _ in BAD_FILES])
def test_bad_model_files(any_run, tiny_image, tmp_path, kind, status, phrases):
    path = make_bad_file(kind, tmp_path, tiny_image.read_bytes())
    done = run(any_run, path, "--ids", "1,2", "--gen", "2")
    assert_clean_failure(done, status, str(path), *phrases)


def test_character_device(any_run):
    done = run(any_run, "/dev/null", "--ids", "1")
    assert_clean_failure(done, 1, "/dev/null: is a character device")


def _drop_file_read_override() -> None:
    """preexec_fn: drop the capabilities that let root read any file."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # fails harmlessly if not root


def test_unreadable_file(any_run, tiny_image, tmp_path):
    path = tmp_path / "secret.bin"
    path.write_bytes(tiny_image.read_bytes())
    path.chmod(0)
    try:
        done = run(any_run, path, "--ids", "1", preexec_fn=_drop_file_read_override)
        if done.returncode == 0:
            pytest.skip("cannot drop CAP_DAC_OVERRIDE here: permissions are not enforced")
        assert_clean_failure(done, 1, str(path), "cannot open the model file: Permission denied")
    finally:
        path.chmod(0o600)


@pytest.mark.parametrize("offset_from_end", [4, 1000])
def test_verify_finds_corrupt_tensor_data(any_run, tiny_image, tmp_path, offset_from_end):
    data = bytearray(tiny_image.read_bytes())
    data[-offset_from_end] ^= 0x40
    path = tmp_path / "corrupt.bin"
    path.write_bytes(bytes(data))
    if offset_from_end == 4 and all(b == 0 for b in data[-64:-4]):
        pytest.skip("the last bytes are padding")  # pragma: no cover
    done = run(any_run, path, "--ids", "1", "--verify")
    assert_clean_failure(done, 1, "failed verification", "tensor table entry")


def test_valid_image_runs_clean_under_sanitizers(colibri_run_asan, tiny_image, tmp_path):
    logits = tmp_path / "logits.bin"
    done = run(colibri_run_asan, tiny_image, "--ids", "1,2,3", "--gen", "5", "--verify",
               "--stats", "--all-logits", logits)
    assert done.returncode == 0, done.stderr
    assert_no_sanitizer_report(done)
    assert len(done.stdout.split()) == 5


# ---- flock --------------------------------------------------------------------------

def test_exclusive_lock_held_by_writer(colibri_run, tiny_image, tmp_path):
    path = tmp_path / "busy.bin"
    path.write_bytes(tiny_image.read_bytes())
    with open(path, "rb") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        done = run(colibri_run, path, "--ids", "1")
    assert_clean_failure(done, 1, "another process holds an exclusive lock")


def test_shared_lock_held_by_reader(colibri_run, tiny_image, tmp_path):
    path = tmp_path / "shared.bin"
    path.write_bytes(tiny_image.read_bytes())
    with open(path, "rb") as f:
        fcntl.flock(f, fcntl.LOCK_SH)
        done = run(colibri_run, path, "--ids", "1", "--gen", "1")
    assert done.returncode == 0, done.stderr


# ---- mlock ----------------------------------------------------------------------------

def _limit_memlock(limit: int):
    """preexec_fn: set RLIMIT_MEMLOCK to `limit` and drop CAP_IPC_LOCK from the
    bounding set, so that even root is held to the limit after exec."""

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (limit, limit))
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_CAPBSET_DROP, CAP_IPC_LOCK, 0, 0, 0)  # fails harmlessly if not root

    return apply


def _still_has_cap_ipc_lock() -> bool:
    """Whether a child started with _limit_memlock keeps CAP_IPC_LOCK."""
    code = ("import sys\n"
            "eff = [l for l in open('/proc/self/status') if l.startswith('CapEff')][0]\n"
            "sys.exit(1 if int(eff.split()[1], 16) >> 14 & 1 else 0)\n")
    done = subprocess.run([sys.executable, "-c", code], preexec_fn=_limit_memlock(1 << 20),
                          check=False)
    return done.returncode != 0


@pytest.fixture(scope="module")
def memlock_enforced():
    if _still_has_cap_ipc_lock():
        pytest.skip("cannot drop CAP_IPC_LOCK here: RLIMIT_MEMLOCK is not enforced")


@pytest.mark.parametrize("limit", [0, 4096, 65536])
def test_mlock_over_limit_explains_the_limit(any_run, tiny_image, memlock_enforced, limit):
    size = tiny_image.stat().st_size
    assert size > limit
    done = run(any_run, tiny_image, "--ids", "1", "--mlock", preexec_fn=_limit_memlock(limit))
    need_kib = (size + 4095) // 4096 * 4  # whole pages, in KiB
    assert_clean_failure(done, 1, "cannot lock the model in memory",
                         f"the image is {size} bytes", f"{limit} bytes",
                         "RLIMIT_MEMLOCK", f"ulimit -l {need_kib}", "limits.conf",
                         "CAP_IPC_LOCK")


def test_mlock_within_limit(any_run, tiny_image, memlock_enforced):
    hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
    limit = 4 << 20 if hard == resource.RLIM_INFINITY else min(4 << 20, hard)
    if limit < tiny_image.stat().st_size + 4096:
        pytest.skip(f"the hard RLIMIT_MEMLOCK ({hard}) is below the image size")
    done = run(any_run, tiny_image, "--ids", "1,2", "--gen", "3", "--mlock", "--stats",
               preexec_fn=_limit_memlock(limit))
    assert done.returncode == 0, done.stderr
    assert "mlock=yes" in done.stderr
    assert_no_sanitizer_report(done)


def test_mlock_unlimited(colibri_run, tiny_image):
    def unlimited() -> None:
        soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
        if hard == resource.RLIM_INFINITY:
            resource.setrlimit(resource.RLIMIT_MEMLOCK, (hard, hard))

    done = run(colibri_run, tiny_image, "--ids", "1", "--mlock", "--stats", preexec_fn=unlimited)
    if done.returncode != 0:
        assert "cannot lock the model in memory" in done.stderr  # no headroom here
    else:
        assert "mlock=yes" in done.stderr


def test_mlock_locks_the_image_not_the_file(any_run, tiny_image, memlock_enforced, tmp_path):
    """A file padded far past the image its header states (1 TiB, sparse): only
    the image is locked, so a limit that fits the image is enough."""
    padded = tmp_path / "padded.bin"
    padded.write_bytes(tiny_image.read_bytes())
    os.truncate(padded, 1 << 40)
    limit = (tiny_image.stat().st_size + 4095) // 4096 * 4096 + 4096
    done = run(any_run, padded, "--ids", "1", "--mlock", "--stats",
               preexec_fn=_limit_memlock(limit), timeout=60)
    assert done.returncode == 0, done.stderr
    assert "mlock=yes" in done.stderr
    assert_no_sanitizer_report(done)


def test_mlock_beyond_the_machines_ram_is_refused(colibri_run, tiny_image, tmp_path):
    """A header that states a 4 TiB image (in a sparse 4 TiB file): even with
    CAP_IPC_LOCK or no RLIMIT_MEMLOCK, locking it is refused with the numbers,
    at once, before any page is touched."""
    huge = tmp_path / "huge.bin"
    header = bytearray(tiny_image.read_bytes()[:4096])
    header[16:24] = (4 << 40).to_bytes(8, "little")
    huge.write_bytes(bytes(header))
    os.truncate(huge, 4 << 40)
    done = run(colibri_run, huge, "--ids", "1", "--mlock", timeout=30)
    assert_clean_failure(done, 1, "cannot lock the model in memory", "the image is 4398046511104",
                         "may be locked on this machine", "of RAM less a margin")
