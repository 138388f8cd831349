"""The Linux expert cache (colibri-run --expert-slots / --memory-budget;
docs/linux.md, Models larger than memory): the routed experts read from the
file into a few slots give the bits of the run that reads them in place, at
every cache size from the minimum to all the experts, on every kernel table
this CPU runs, threads {1, 2, 3} and prompt chunks {1, 7, 32}, with and
without reader threads, both eviction policies; and a budget below the
minimum is refused with a message that states it. The in-place run is
itself held to transformers by test_bit_identity and the golden tests."""
from __future__ import annotations

import hashlib
import re
import subprocess

import pytest
from cpu_tables import runnable
from golden_helpers import REPO

FAMILIES = ["mixtral", "qwen2_moe", "gpt_oss", "deepseek_v3", "longcat_flash", "lfm2_moe",
            "granitemoehybrid", "qwen3_next", "kimi_linear", "nemotron_h"]
FORMATS = ["f32", "int4+attention+rows16"]
IDS = "1,5,9,3,7,2,8,4,6,11,13,12,10"


@pytest.fixture(scope="module")
def colibri_run():
    done = subprocess.run(["make", "-s", "-j2", "build/host/colibri-run"], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return REPO / "build" / "host" / "colibri-run"


def _image(fmt, family, converted, quantized):
    return converted(family)[1] if fmt == "f32" else quantized(family, fmt)[1]


def _run(colibri_run, image, tmp_path, *args) -> tuple[str, str]:
    """(digest of the prompt's logits and the generated ids, stderr)."""
    logits = tmp_path / "logits.f32"
    done = subprocess.run([str(colibri_run), str(image), "--ids", IDS, "--gen", "6",
                           "--all-logits", str(logits), "--stats", *map(str, args)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    digest = hashlib.sha256(logits.read_bytes() + done.stdout.encode()).hexdigest()
    return digest, done.stderr


def _cache_line(stderr: str) -> dict[str, str]:
    line = re.search(r"expert_cache: (.*)", stderr)[1]
    return dict(kv.split("=") for kv in line.split())


def _slot_counts(colibri_run, image, tmp_path) -> list[int]:
    """The minimum, a middle and the all-experts slot counts of the image."""
    _, err = _run(colibri_run, image, tmp_path, "--expert-slots", 100000)
    every = int(_cache_line(err)["slots"])  # capped at every expert of every MoE layer
    top_k = int(re.search(r"top_k=(\d+)", err)[1])
    least = max(top_k, 3)
    return sorted({least, (least + every) // 2, every})


@pytest.mark.parametrize("table", ["reference", *runnable()])
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("family", FAMILIES)
def test_every_size_and_table_same_bits(family, fmt, table, colibri_run, converted, quantized,
                                        tmp_path):
    image = _image(fmt, family, converted, quantized)
    want, _ = _run(colibri_run, image, tmp_path, "--kernels", table, "--threads", 2)
    for slots in _slot_counts(colibri_run, image, tmp_path):
        for io in (0, 2):
            got, err = _run(colibri_run, image, tmp_path, "--kernels", table, "--threads", 2,
                            "--expert-slots", slots, "--io-threads", io)
            assert got == want, (slots, io, err)
            assert int(_cache_line(err)["slots"]) == slots


@pytest.mark.parametrize("threads, batch", [(1, 1), (1, 32), (2, 7), (3, 1), (3, 32)])
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("family", FAMILIES)
def test_threads_and_chunks_same_bits(family, fmt, threads, batch, colibri_run, converted,
                                      quantized, tmp_path):
    image = _image(fmt, family, converted, quantized)
    common = ("--threads", threads, "--batch", batch)
    want, _ = _run(colibri_run, image, tmp_path, *common)
    least = _slot_counts(colibri_run, image, tmp_path)[0]
    for policy in ("quota", "lru"):
        got, err = _run(colibri_run, image, tmp_path, *common, "--expert-slots", least,
                        "--cache-policy", policy)
        assert got == want, (policy, err)
        assert re.search(r"expert_reads: acquires=[1-9]\d* .* failures=0", err), err


def test_budget_sizes_the_cache_and_states_the_minimum(colibri_run, converted, tmp_path):
    image = converted("mixtral")[1]
    want, _ = _run(colibri_run, image, tmp_path)
    _, err = _run(colibri_run, image, tmp_path, "--expert-slots", 3)
    line = _cache_line(err)
    fixed, slot = int(line["fixed_bytes"]), int(line["slot_bytes"])
    for slots in (3, 4, 5):
        got, err = _run(colibri_run, image, tmp_path, "--memory-budget", fixed + slots * slot + 7)
        assert got == want
        assert int(_cache_line(err)["slots"]) == slots
    done = subprocess.run([str(colibri_run), str(image), "--ids", IDS, "--gen", "6",
                           "--all-logits", str(tmp_path / "logits.f32"), "--memory-budget",
                           str(fixed + 3 * slot - 1)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stdout == ""
    minimum = re.search(r"below this model's minimum of (\d+) bytes", done.stderr)
    assert minimum and int(minimum[1]) == fixed + 3 * slot, done.stderr


@pytest.mark.parametrize("family", FAMILIES)
def test_random_tokens_same_bits_and_reproducible(family, colibri_run, converted, tmp_path):
    """--random-tokens (the benchmark's varied routing) feeds the same ids
    with and without the cache, the same for a seed, others for another."""
    image = converted(family)[1]
    want, _ = _run(colibri_run, image, tmp_path, "--random-tokens", 5)
    got, _ = _run(colibri_run, image, tmp_path, "--random-tokens", 5, "--expert-slots", 3)
    other, _ = _run(colibri_run, image, tmp_path, "--random-tokens", 6)
    assert got == want != other


def test_more_picks_than_real_experts(colibri_run, tmp_path):
    """LongCat-Flash with 2 real experts and 4 zero-computation ones, top-5,
    one MoE layer: a token uses at most the 2 real experts, so the cache's
    fewest slots are the 2 blocks there are (not top_k), and every budget
    from them up gives the in-place bits."""
    from colibri_tools.converter.convert import convert
    from hf_models import build_model, save_checkpoint

    model, _config = build_model("longcat_flash", seed=5, num_layers=1, n_routed_experts=2,
                                 zero_expert_num=4, moe_topk=5)
    save_checkpoint(model, tmp_path / "hf")
    convert(tmp_path / "hf", tmp_path / "out", context=64, progress=False)
    image = tmp_path / "out" / "model.bin"
    want, _ = _run(colibri_run, image, tmp_path)
    got, err = _run(colibri_run, image, tmp_path, "--expert-slots", 100000)
    assert got == want and int(_cache_line(err)["slots"]) == 2, err
    line = _cache_line(err)
    fixed, slot = int(line["fixed_bytes"]), int(line["slot_bytes"])
    got, err = _run(colibri_run, image, tmp_path, "--memory-budget", fixed + 2 * slot)
    assert got == want and int(_cache_line(err)["slots"]) == 2, err
