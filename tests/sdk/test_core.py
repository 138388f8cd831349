"""The core's own tests: C unit tests, every broken image under ASan/UBSan,
the fingerprint check, and the loader fuzz target."""
from __future__ import annotations

import os
import pathlib
import platform
import re
import shutil
import subprocess

import pytest
from broken_images import CONFIG_MISMATCH, write_broken_images
from cpu_tables import X86_TABLES, runnable

REPO = pathlib.Path(__file__).resolve().parents[2]
SAN_ENV = {**os.environ, "ASAN_OPTIONS": "abort_on_error=0:detect_leaks=1",
           "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"}


def probe(bins: pathlib.Path, image: pathlib.Path, *extra: str) -> dict[str, int]:
    done = subprocess.run([str(bins / "image_probe"), str(image), *extra], capture_output=True,
                          text=True, timeout=60, env=SAN_ENV)
    assert done.returncode == 0 and "ERROR" not in done.stderr, done.stderr
    return {k: int(v) for k, v in re.findall(r"(\w+)=(-?\d+)", done.stdout)}


def test_c_unit_tests(asan_bins):
    done = subprocess.run([str(asan_bins / "test_units")], capture_output=True, text=True,
                          timeout=60, env=SAN_ENV)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^\d+ passed, 0 failed$", done.stdout, re.M)


def test_every_kernel_table_meets_the_contract(asan_bins):
    done = subprocess.run([str(asan_bins / "test_kernels")], capture_output=True, text=True,
                          timeout=120, env=SAN_ENV)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "reference: checked" in done.stdout
    assert re.search(r"^\d+ passed, 0 failed$", done.stdout, re.M)
    if platform.machine() == "x86_64":  # the host build has the three x86 tables
        for table in X86_TABLES:
            verdict = "checked" if table in runnable() else "skipped"
            assert f"{table}: {verdict}" in done.stdout


@pytest.mark.parametrize("cpu, dotprod", [("cortex-a72", False), ("cortex-a76", True)])
def test_aarch64_kernel_tables_meet_the_contract(cpu, dotprod):
    """The NEON tables (and the reference) built for AArch64, run under
    qemu-user: the same contract, bit for bit. A Cortex-A72 (Raspberry Pi 4)
    lacks the dot-product extension, so the port's probe must skip neondot
    there, and the reference and neon are checked on it; a Cortex-A76 (Pi 5)
    has it, and checks neondot (each table once: the suite's time)."""
    for tool in ("aarch64-linux-gnu-gcc", "qemu-aarch64"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (scripts/setup.sh installs it)")
    target = "build/aarch64-test/test_kernels"
    subprocess.run(["make", "-s", target], cwd=REPO, check=True, timeout=600)
    tables = ["neondot"] if dotprod else ["reference", "neon", "neondot"]
    done = subprocess.run(["qemu-aarch64", "-cpu", cpu, str(REPO / target), *tables],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ("neon: checked" in done.stdout) != dotprod
    assert ("reference: checked" in done.stdout) != dotprod
    verdict = "checked" if dotprod else "skipped, this CPU cannot run it"
    assert f"neondot: {verdict}" in done.stdout
    assert re.search(r"^\d+ passed, 0 failed$", done.stdout, re.M)


def test_port_seam_grows_without_breaking_older_ports(asan_bins, valid_image):
    done = subprocess.run([str(asan_bins / "test_port_seam"), str(valid_image)],
                          capture_output=True, text=True, timeout=120, env=SAN_ENV)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^\d+ passed, 0 failed$", done.stdout, re.M)


def test_valid_image_loads_verifies_and_runs(asan_bins, valid_image):
    assert probe(asan_bins, valid_image) == {"init": 0, "verify": 0, "forward": 0}


def test_quantized_images_load_verify_and_run(asan_bins, valid_q8_image, valid_q4_image,
                                              valid_r16_image, valid_qk_image,
                                              valid_qk_r16_image):
    """Format 1.3: Q8 feed-forward matrices; Q4 feed-forward and attention;
    1.8: the same in groups of 16 rows; 1.15: QK3 super-blocks, each row's one
    padded; 1.16: those in groups of 16 rows (under ASan/UBSan: no read past a
    quantized tensor, nor past a padded last group or super-block)."""
    for image, minor in ((valid_q8_image, 3), (valid_q4_image, 3), (valid_r16_image, 8),
                         (valid_qk_image, 15), (valid_qk_r16_image, 16)):
        assert image.read_bytes()[10] == minor  # version_minor
        assert probe(asan_bins, image) == {"init": 0, "verify": 0, "forward": 0}


def test_broken_images_each_report_their_status(asan_bins, valid_image, valid_q8_image,
                                                valid_r16_image, valid_qk_image,
                                                valid_qk_r16_image, tmp_path):
    manifest = write_broken_images(valid_image.read_bytes(), tmp_path / "broken",
                                   valid_q8_image.read_bytes(), valid_r16_image.read_bytes(),
                                   valid_qk_image.read_bytes(), valid_qk_r16_image.read_bytes())
    wrong = {}
    for name, expect in manifest.items():
        got = probe(asan_bins, tmp_path / "broken" / f"{name}.bin")
        if any(got[key] != value for key, value in expect.items()):
            wrong[name] = (expect, got)
    assert not wrong
    assert len(manifest) >= 30


def test_fingerprint_mismatch_is_refused(asan_bins, valid_image):
    fingerprint = int.from_bytes(valid_image.read_bytes()[24:28], "little")
    assert probe(asan_bins, valid_image, hex(fingerprint))["init"] == 0
    assert probe(asan_bins, valid_image, hex(fingerprint ^ 1))["init"] == CONFIG_MISMATCH


@pytest.mark.skipif(shutil.which("clang") is None, reason="libFuzzer needs clang")
def test_fuzz_loader_for_a_while(valid_image, valid_q8_image, valid_r16_image, valid_qk_image,
                                 valid_qk_r16_image, valid_mla_image, valid_experts_last_image,
                                 valid_family_images, tmp_path, record_property):
    """Bounded libFuzzer run seeded with a valid image, a Multi-head Latent
    Attention one, an experts-last one (format 1.9, also given in part to a
    port whose experts never come), PhiMoE, ERNIE-4.5 and gpt-oss ones and
    the broken ones;
    any crash, sanitizer report, leak or timeout fails the test, and so does a
    run too short to matter (the executions are recorded). Longer campaigns:
    docs/core.md, "Fuzzing"."""
    subprocess.run(["make", "-s", "-j2", "fuzz"], cwd=REPO, check=True)
    corpus = tmp_path / "corpus"
    write_broken_images(valid_image.read_bytes(), corpus, valid_q8_image.read_bytes(),
                        valid_r16_image.read_bytes(), valid_qk_image.read_bytes(),
                        valid_qk_r16_image.read_bytes())
    (corpus / "manifest.json").unlink()
    (corpus / "valid_mla.bin").write_bytes(valid_mla_image.read_bytes())
    (corpus / "valid_experts_last.bin").write_bytes(valid_experts_last_image.read_bytes())
    for image in valid_family_images:
        (corpus / f"valid_{image.parent.parent.name}.bin").write_bytes(image.read_bytes())
    seconds = os.environ.get("COLIBRI_FUZZ_SECONDS", "12")
    done = subprocess.run(
        [str(REPO / "build" / "fuzz" / "fuzz_image"), f"-max_total_time={seconds}",
         "-timeout=10", "-rss_limit_mb=2048", f"-artifact_prefix={tmp_path}/", str(corpus)],
        capture_output=True, text=True, timeout=int(seconds) + 120)
    assert done.returncode == 0, done.stderr[-3000:]
    runs = int(re.search(r"Done (\d+) runs", done.stderr).group(1))
    record_property("fuzz_image_runs", runs)
    assert runs >= 500 * int(seconds), f"only {runs} executions in {seconds} s"


def test_python_reader_agrees_with_the_core(valid_image, valid_q8_image, valid_r16_image,
                                            valid_qk_image, valid_qk_r16_image, tmp_path):
    """The tools' image reader reports the same status as colibri_init (and,
    for an image colibri_init accepts, as colibri_verify)."""
    from colibri_tools.errors import ImageFormatError
    from colibri_tools.image.image_format import read_image
    from colibri_tools.image.status import Status

    manifest = write_broken_images(valid_image.read_bytes(), tmp_path, valid_q8_image.read_bytes(),
                                   valid_r16_image.read_bytes(), valid_qk_image.read_bytes(),
                                   valid_qk_r16_image.read_bytes())
    for name, expect in manifest.items():
        data = (tmp_path / f"{name}.bin").read_bytes()
        if expect["init"] == 0:
            read_image(data)
            with pytest.raises(ImageFormatError) as caught:
                read_image(data, verify_data=True)
            assert caught.value.status == Status(expect["verify"]).c_name, name
            continue
        with pytest.raises(ImageFormatError) as caught:
            read_image(data)
        assert caught.value.status == Status(expect["init"]).c_name, name
