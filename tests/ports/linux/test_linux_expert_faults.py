"""The expert cache when storage misbehaves (docs/linux.md, Models larger than
memory): expert_faults.c runs the tiny image with the fewest slots through a
reader that fails once (EIO, the file ending inside a block, a flipped bit
with --verify) or keeps being awkward (half reads, EINTR). A failure is
COLIBRI_E_EXPERT_UNAVAILABLE with the state's position kept and a message
naming the layer, the expert and the cause; the pass run again then gives the
same bits as a clean run. Awkward reads change nothing. Built plain, with
ASan/UBSan and with ThreadSanitizer (the reader threads)."""
from __future__ import annotations

import re
import shlex
import subprocess

import pytest
from linux_helpers import REPO, assert_no_sanitizer_report
from test_linux_port_api import FLAVOURS, WARN

UNAVAILABLE = 34  # COLIBRI_E_EXPERT_UNAVAILABLE


@pytest.fixture(scope="module", params=sorted(FLAVOURS))
def expert_faults(request, tmp_path_factory):
    exe = tmp_path_factory.mktemp("faults") / f"expert_faults_{request.param}"
    cmd = (["cc", *shlex.split(WARN), *shlex.split(FLAVOURS[request.param]),
            f"-I{REPO / 'sdk/include'}", f"-I{REPO / 'ports/linux'}",
            str(REPO / "tests/ports/linux/expert_faults.c"),
            *map(str, sorted((REPO / "ports/linux").glob("colibri_linux*.c"))),
            *(str(p) for sub in (".", "ota", "crypto")
              for p in sorted((REPO / "sdk/src" / sub).glob("*.c"))),
            str(REPO / "sdk/src/kernels/reference.c"), f"-I{REPO / 'sdk/src'}", "-pthread",
            "-o", str(exe)])
    built = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=300)
    assert built.returncode == 0, built.stderr
    return exe


def _run(exe, image, mode, nth, io_threads, verify=0) -> str:
    done = subprocess.run([str(exe), str(image), mode, str(nth), str(io_threads), str(verify)],
                          capture_output=True, text=True, check=False, timeout=120)
    assert_no_sanitizer_report(done)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _crc(out: str) -> str:
    return re.search(r"^ok ([0-9a-f]{8})$", out, re.M)[1]


@pytest.mark.parametrize("io_threads", [0, 2])
@pytest.mark.parametrize("mode, nth, verify, cause", [
    ("eio", 1, 0, "read error at byte \\d+: Input/output error"),
    ("eio", 9, 0, "read error at byte \\d+: Input/output error"),
    ("eof", 4, 0, "the file ends at byte \\d+, inside the block"),
    ("flip", 6, 1, "the block read at byte \\d+ fails its check: checksum"),
])
def test_a_failed_read_is_named_and_loses_nothing(expert_faults, tiny_image, io_threads, mode,
                                                  nth, verify, cause):
    clean = _crc(_run(expert_faults, tiny_image, "none", 0, io_threads, verify))
    out = _run(expert_faults, tiny_image, mode, nth, io_threads, verify)
    fails = re.findall(r"^fail (\d+) pos (\d+)->(\d+): (.*)$", out, re.M)
    assert len(fails) == 1, out
    status, before, after, why = fails[0]
    assert int(status) == UNAVAILABLE and before == after, out
    assert re.fullmatch(f"layer [01] expert [0-3]: {cause}.*", why), why
    assert _crc(out) == clean


@pytest.mark.parametrize("io_threads", [0, 2])
@pytest.mark.parametrize("mode", ["short", "eintr"])
def test_partial_and_interrupted_reads_change_nothing(expert_faults, tiny_image, io_threads,
                                                      mode):
    clean = _crc(_run(expert_faults, tiny_image, "none", 0, io_threads))
    out = _run(expert_faults, tiny_image, mode, 1, io_threads)
    assert "fail" not in out and _crc(out) == clean, out


def test_without_verify_a_flipped_bit_goes_unseen(expert_faults, tiny_image):
    """Why --verify exists: the same flip without it is read as weights."""
    clean = _crc(_run(expert_faults, tiny_image, "none", 0, 0))
    out = _run(expert_faults, tiny_image, "flip", 6, 0)
    assert "fail" not in out and _crc(out) != clean, out
