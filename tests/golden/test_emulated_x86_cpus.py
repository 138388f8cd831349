"""The x86-64 build on x86-64 CPUs this machine is not: colibri-run under
qemu-x86_64 with CPU models that lack AVX-512 (Haswell: AVX2, FMA and F16C)
or AVX2 too (Sandy Bridge), so that a machine with AVX-512 still checks what
an AVX2-only one runs. The Linux port's probe must pick the table the CPU
model can run (QEMU's CPUID says what it has; an instruction it lacks would
stop the run with SIGILL), and the logits must be the native reference's,
byte for byte, on one and two threads, float32 and both quantized layouts."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest

QEMU = "qemu-x86_64"
# CPU model -> the table the probe must pick on it.
CPU_MODELS = {"Haswell": "avx2", "SandyBridge": "reference"}
WEIGHTS = [None, "int8+attention", "int4+attention+embeddings+rows16"]


def _image(converted, quantized, weights):
    return converted("mixtral")[1] if weights is None else quantized("mixtral", weights)[1]


def _run(argv: list[str], image, ids, logits, *extra: str) -> str:
    cmd = [*argv, str(image), "--ids", ",".join(map(str, ids)), "--context", "64", "--stats",
           "--all-logits", str(logits), *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stderr


@pytest.mark.parametrize("weights", WEIGHTS, ids=lambda w: w or "f32")
@pytest.mark.parametrize("cpu", list(CPU_MODELS))
def test_probe_and_logits_on_an_emulated_cpu(cpu, weights, converted, quantized, colibri_run,
                                             tmp_path):
    if shutil.which(QEMU) is None:
        pytest.skip(f"{QEMU} not installed (Debian: qemu-user; scripts/setup.sh installs it)")
    image = _image(converted, quantized, weights)
    vocab = converted("mixtral")[0].config.vocab_size
    ids = [(7 * i + 3) % vocab for i in range(20)]
    _run([str(colibri_run)], image, ids, tmp_path / "native.bin", "--kernels", "reference",
         "--threads", "1")
    want = (tmp_path / "native.bin").read_bytes()
    for threads in ("1", "2"):
        got = tmp_path / f"{cpu}-{threads}.bin"
        stats = _run([QEMU, "-cpu", cpu, str(colibri_run)], image, ids, got, "--threads",
                     threads, "--batch", "7")
        picked = re.search(r"kernels: (\w+)", stats)
        assert picked and picked.group(1) == CPU_MODELS[cpu], stats[-2000:]
        assert got.read_bytes() == want, f"{cpu}, {threads} threads: logits differ"
