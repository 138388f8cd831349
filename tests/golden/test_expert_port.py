"""Routed experts reached through the port (port version 4: expert_acquire,
expert_release, experts_chosen; docs/core.md, Experts from storage): the same
bits as the in-place run, on every kernel table this CPU runs, threads
{1, 2, 3} and prompt chunks {1, 7, 32}, float32 and int4 row-group images of
the families whose feed-forward differs (shared expert and dense layers,
expert biases, MLA with a selection bias, zero-computation experts in shortcut
layers, short convolution layers). tests/sdk/expert_port.c poisons
every expert block of the image it gives the core, so any read in place, or
of a block after its release, changes the logits; its port checks the rules
of the seam. A failing acquire gives COLIBRI_E_EXPERT_UNAVAILABLE with
nothing held and the state's position kept, and the same call run again on
that state gives the in-place bits: the state lost nothing (the KV cache,
LFM2's short convolution rows, format 1.13)."""
from __future__ import annotations

import re
import subprocess

import pytest
from colibri_tools import read_image
from colibri_tools.image.image_spec import EXPERT_ROLES
from cpu_tables import runnable
from golden_helpers import REPO

FAMILIES = ["mixtral", "qwen2_moe", "gpt_oss", "deepseek_v3", "longcat_flash", "lfm2_moe",
            "granitemoehybrid", "qwen3_next", "kimi_linear", "nemotron_h"]
FORMATS = ["f32", "int4+attention+rows16"]


@pytest.fixture(scope="module")
def expert_port():
    done = subprocess.run(["make", "-s", "-j2", "build/asan/expert_port"], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return REPO / "build" / "asan" / "expert_port"


def _image(fmt, family, converted, quantized):
    return converted(family)[1] if fmt == "f32" else quantized(family, fmt)[1]


def _run(expert_port, image, table, threads, batch, fail_at=0) -> str:
    done = subprocess.run([str(expert_port), str(image), table, str(threads), str(batch),
                           str(fail_at)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.parametrize("table", ["reference", *runnable()])
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("family", FAMILIES)
def test_every_table_same_bits(family, fmt, table, expert_port, converted, quantized):
    out = _run(expert_port, _image(fmt, family, converted, quantized), table, 2, 7)
    assert re.fullmatch(r"ok acquires=[1-9]\d* held=[12]\n", out), out


@pytest.mark.parametrize("threads, batch", [(1, 1), (1, 32), (2, 1), (3, 7), (3, 32)])
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("family", FAMILIES)
def test_threads_and_chunks_same_bits(family, fmt, threads, batch, expert_port, converted,
                                      quantized):
    out = _run(expert_port, _image(fmt, family, converted, quantized), "reference", threads, batch)
    assert re.fullmatch(r"ok acquires=[1-9]\d* held=[12]\n", out), out


@pytest.mark.parametrize("family", FAMILIES)
def test_a_failed_acquire_loses_nothing(family, expert_port, converted):
    image = converted(family)[1]
    total = int(re.search(r"acquires=(\d+)", _run(expert_port, image, "reference", 1, 7))[1])
    for fail_at in (1, total // 2, total):
        out = _run(expert_port, image, "reference", 1, 7, fail_at)
        assert out.startswith("ok "), out


@pytest.mark.parametrize("quant", [None, "int4"])
@pytest.mark.parametrize("family", FAMILIES)
def test_an_experts_last_image_runs_from_its_start_alone(family, quant, expert_port,
                                                         experts_last):
    """The core given only the bytes before the first expert block (the rest
    in storage, read through the port): the in-place logits, bit for bit."""
    image = experts_last(family, quant)
    out = _run(expert_port, image, "reference", 2, 7)
    found = re.fullmatch(r"ok acquires=[1-9]\d* held=[12] prefix=(\d+)\n", out)
    assert found, out
    tensors = read_image(image).tensors
    experts = sum(t.size for t in tensors if t.role in EXPERT_ROLES)
    assert 0 < int(found[1]) <= image.stat().st_size - experts, out


def test_a_chunk_using_more_experts_than_tokens(expert_port, tmp_path):
    """256 experts, top-8, the 13-token prompt in one chunk: experts_chosen
    names about 90 experts, more than the chunk's scratch has token slots
    (the region that lists them must hold min(E, B * top_k); ASan sees a
    write past it)."""
    from colibri_tools.converter.convert import convert
    from hf_models import build_model, save_checkpoint

    model, _config = build_model("mixtral", seed=3, num_local_experts=256, num_experts_per_tok=8,
                                 intermediate_size=8)
    save_checkpoint(model, tmp_path / "hf")
    convert(tmp_path / "hf", tmp_path / "out", context=64, progress=False)
    out = _run(expert_port, tmp_path / "out" / "model.bin", "reference", 2, 32)
    assert re.fullmatch(r"ok acquires=[1-9]\d* held=[12]\n", out), out
