"""The TrustZone-M split on QEMU's mps3-an547 (docs/trustzone.md): the Secure
image (samples/baremetal/tz_secure) owns the signed model image, the engine's
state and scratch; the Non-secure application (samples/baremetal/tz_app)
calls colibri_tz_forward through its veneer, once per forward pass.

Checked here: the Non-secure logits are the single-world self-test's bits;
a Non-secure interrupt inside a Secure pass finds the entries busy and the
FP/MVE registers clear; pointers into Secure memory (or ranges leaving the
caller's) are refused with COLIBRI_TZ_E_POINTER and change nothing; a Non-secure read of the weights is
a SecureFault (AUVIOL) that the Secure side catches and reports; an unsigned
image, one signed by another key and one with a byte changed are refused
before any weight is used; the crossing costs far under 5 % of a forward
pass's instructions; the Non-secure image links no engine and no weights;
and the board file's [trustzone] is checked."""
from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
from cm_helpers import REPO, elf_symbols, fields, qemu_argv, selftest_logits
from colibri_tools.board import boards, port_trustzone
from colibri_tools.image import signing

BOARD = "qemu_an547"
TZ_E_POINTER, TZ_E_NOT_READY, TZ_E_BUSY = 1000, 1001, 1002  # trustzone/colibri_tz.h
E_BAD_ARGUMENT = 1
EXIT_FAULT, EXIT_NOT_SERVED = 250, 3       # cortex_m.h CM_EXIT_FAULT; tz_app
SFSR_AUVIOL = 0x8
REFUSED = {"ids_in_the_weights", "logits_in_secure_ram", "logits_past_ns_ram",
           "logits_in_secure_ram_mode_0x100", "no_ids_in_the_weights", "info_in_secure_ram",
           "text_in_the_weights"}


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> dict[str, pathlib.Path]:
    root = tmp_path_factory.mktemp("tz_keys")
    for name in ("release", "other"):
        assert signing.main(["keygen", "-o", str(root / name)]) == 0
    return {"release": root / "release", "other": root / "other"}


@pytest.fixture(scope="module")
def tz_firmware(need_qemu, cm_model, cm_build_dir, keys) -> tuple[pathlib.Path, pathlib.Path]:
    done = subprocess.run(
        ["make", "-s", "-j2", "firmware-tz", f"BOARD={BOARD}", f"MODEL_DIR={cm_model}",
         f"BUILD={cm_build_dir}", f"TRUSTED_KEY={keys['release']}.pub"],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    fw = cm_build_dir / "fw" / BOARD
    return fw / "tz_secure" / "firmware.elf", fw / "tz_app" / "ns.elf"


def _signed(cm_model, keys, tmp_path, key: str = "release") -> pathlib.Path:
    out = tmp_path / f"signed_{key}.bin"
    assert signing.main(["sign", str(cm_model / "model.bin"), "--key", f"{keys[key]}.pem",
                         "-o", str(out)]) == 0
    return out


def _run(tz_firmware, image: pathlib.Path) -> subprocess.CompletedProcess:
    secure, nonsecure = tz_firmware
    argv = [*qemu_argv(BOARD, secure, image), "-device", f"loader,file={nonsecure}"]
    return subprocess.run(["timeout", "--kill-after=5", "60", *argv], capture_output=True,
                          text=True, timeout=75, check=False, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def tz_run(tz_firmware, cm_model, keys, tmp_path_factory):
    return _run(tz_firmware, _signed(cm_model, keys, tmp_path_factory.mktemp("tz_run")))


def _lines(out: str, prefix: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith(prefix)]


def _vocab(cm_model) -> int:
    return int(re.search(r"#define COLIBRI_MODEL_VOCAB_SIZE +(\d+)u",
                         (cm_model / "model_config.h").read_text())[1])


def test_nonsecure_logits_are_the_single_world_bits(tz_run, cm_firmware, cm_model):
    assert "secure: image: success" in tz_run.stdout, tz_run.stdout[-2000:]
    single = cm_firmware(BOARD)
    done = subprocess.run(["timeout", "--kill-after=5", "60",
                           *qemu_argv(BOARD, single.elf, cm_model / "model.bin")],
                          capture_output=True, text=True, timeout=75, check=False)
    assert done.returncode == 0, done.stdout[-2000:]
    vocab = _vocab(cm_model)
    got, want = selftest_logits(tz_run.stdout, vocab), selftest_logits(done.stdout, vocab)
    assert got.tobytes() == want.tobytes()
    assert np.isfinite(got).all()


def test_pointers_into_secure_memory_are_refused_and_change_nothing(tz_run):
    refused = {line.split()[2]: int(fields(line)["status"])
               for line in _lines(tz_run.stdout, "tz: refused ")}
    assert refused == {**{what: TZ_E_POINTER for what in REFUSED}, "mode_0x100": E_BAD_ARGUMENT}
    before, after = (fields(line) for line in _lines(tz_run.stdout, "tz: info "))
    assert before["pos"] == "0" and after["pos"] == "16"  # the two passes', nothing more
    assert before["fingerprint"] == after["fingerprint"]


def test_a_nonsecure_interrupt_inside_a_pass_finds_it_busy_and_the_registers_clear(tz_run):
    """A second pass with the Non-secure SysTick handler calling
    colibri_tz_reset while the Secure side computes: the nested call is
    refused (it would move the position under the pass), and the FP/MVE
    registers the handler reads hold nothing of the Secure pass (FPCCR.TS)."""
    line = fields(_lines(tz_run.stdout, "tz: preempted forward ")[0])
    assert line == {"status": "0", "interrupted": "yes", "nested_reset": str(TZ_E_BUSY),
                    "fp_registers": "clear"}


def test_a_nonsecure_read_of_the_weights_is_caught_as_a_securefault(tz_run):
    out = tz_run.stdout
    assert "tz: reading the weights at 0x90000000" in out, out[-2000:]
    assert "tz: read the weights" not in out  # the load never completed
    fault = fields(_lines(out, "FAULT")[0])
    assert int(fault["exception"], 16) == 7 and int(fault["sfsr"], 16) & SFSR_AUVIOL
    regions = port_trustzone.trustzone_regions(boards.load(BOARD))
    code = regions["ns_code"]
    assert code.origin <= int(fault["pc"], 16) < code.end  # the Non-secure load's address
    assert int(fault["exc_return"], 16) & 0x40 == 0       # taken from the Non-secure state
    assert tz_run.returncode == EXIT_FAULT


@pytest.mark.parametrize("defect, status", [
    ("unsigned", "image is not signed: no signature block after it"),
    ("other key", "image signed by a key this device does not trust"),
    ("one byte changed", "image data does not match its signed block hashes")])
def test_an_image_not_signed_by_the_trusted_key_is_refused_before_use(
        defect, status, tz_firmware, cm_model, keys, tmp_path):
    if defect == "unsigned":
        image = cm_model / "model.bin"
    elif defect == "other key":
        image = _signed(cm_model, keys, tmp_path, "other")
    else:
        data = bytearray(_signed(cm_model, keys, tmp_path).read_bytes())
        data[len(data) // 3] ^= 0x01  # in a tensor's data, past the signed header's block
        image = tmp_path / "tampered.bin"
        image.write_bytes(bytes(data))
    done = _run(tz_firmware, image)
    assert _lines(done.stdout, "secure: image: ") == [f"secure: image: {status}"], \
        done.stdout[-2000:]
    assert f"tz: info status={TZ_E_NOT_READY}" in done.stdout
    assert not _lines(done.stdout, "logits ") and done.returncode == EXIT_NOT_SERVED


def test_the_secure_call_costs_under_5_percent_of_a_forward(tz_run, record_property):
    """Ticks of the Non-secure SysTick around colibri_tz_forward against the
    Secure side's count of colibri_forward alone (the same clock: under
    -icount shift=0 a tick is 31.25 instructions)."""
    line = fields(_lines(tz_run.stdout, "tz: forward ")[0])
    total, inside = int(line["total_ticks"]), int(line["secure_ticks"])
    record_property("tz_forward_ticks", f"total {total} secure {inside}")
    assert 0 < inside < total <= 1.05 * inside


def test_the_nonsecure_image_holds_no_engine_and_calls_veneers(tz_firmware):
    secure, nonsecure = tz_firmware
    ns = elf_symbols(nonsecure)
    assert not {"colibri_forward", "colibri_init", "colibri_kernels_reference"} & set(ns)
    s = elf_symbols(secure)
    nsc = port_trustzone.trustzone_regions(boards.load(BOARD))["nsc"]
    for entry in ("colibri_tz_forward", "colibri_tz_info_get", "colibri_tz_console_write"):
        assert nsc.origin <= s[entry] < nsc.end, entry          # its veneer
        assert s[f"__acle_se_{entry}"] < nsc.origin, entry      # the function, Secure code
        assert (ns[entry] & ~1) == (s[entry] & ~1), entry       # the import library's address


@pytest.mark.parametrize("table, message", [
    ("", "no [trustzone] table"),
    ('nsc = { origin = 0x3F000, length = 0x1000 }\n'
     'ns_code = { origin = 0x40000, length = 0x40000 }\n'
     'ns_ram = { origin = 0x21000000, length = 0x1000 }', "ns_ram must be clear"),
    ('nsc = { origin = 0x3F010, length = 0x1000 }\n'
     'ns_code = { origin = 0x40000, length = 0x40000 }\n'
     'ns_ram = { origin = 0x20000000, length = 0x1000 }', "32-byte granules"),
    ('nsc = { origin = 0x41000, length = 0x1000 }\n'
     'ns_code = { origin = 0x40000, length = 0x40000 }\n'
     'ns_ram = { origin = 0x20000000, length = 0x1000 }', "nsc below ns_code"),
    ('nsc = { origin = 0x3F000, length = 0x1000 }\n'
     'ns_code = { origin = 0x40000, length = 0x40000 }\n'
     'ns_ram = { origin = 0x20000000, length = 0x1000 }\nuart = 1', "unknown key(s) uart"),
    ('nsc = { origin = 0x3F000, length = 0x1000 }\n'
     'ns_code = { origin = 0x40000, length = 0x40000 }\n'
     'ns_ram = { origin = 0x31000000, length = 0x1000 }', "ns_ram's other alias")])
def test_a_trustzone_table_that_cannot_work_is_refused(table, message, tmp_path):
    text = (REPO / "boards" / f"{BOARD}.toml").read_text()
    start = text.index("[trustzone]")
    end = text.index("\n[", start + 1)
    board = tmp_path / f"{BOARD}.toml"
    board.write_text(text[:start] + ("[trustzone]\n" + table if table else "") + text[end:])
    done = subprocess.run([sys.executable, "-m",
                           "colibri_tools.board.port_trustzone", "header", str(board)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1 and message in done.stderr, done.stderr
