"""The int8 KV cache (format 1.15, colibri-convert --kv-int8, docs/core.md):
logits near transformers' float32 ones, the same bits on every kernel table,
thread count and chunk size, a state about a quarter of the float32 one (C's
colibri_state_size and model_config.h agree), and MLA models refused."""
from __future__ import annotations

import re

import pytest
from colibri_tools.errors import OptionError
from cpu_tables import runnable
from golden_helpers import record
from test_bit_identity import assert_same_bits
from test_quant_fidelity import near_transformers

# Mean KL of the next token against transformers over 4 prompts x 40 positions,
# measured (seed: the family's index in FAMILIES): olmoe 1.7e-5, gpt_oss (sinks,
# sliding window) 3.4e-4, qwen3_next (gated delta layers, gated attention) 8e-6;
# top-1 0.994-1.0. Bounds: 3x, and top-1 >= 0.97. Llama 4 (chunked attention, its
# top-1 router on the logits): 2.2e-3, most of it one position of 160 whose expert
# flips (KL 0.12 there, 5e-5 elsewhere).
KV_FAMILIES = {"mixtral": 3e-4, "olmoe": 1e-4, "gpt_oss": 1.2e-3, "mixtral_window": 3e-4,
               "llama4_text": 5e-3, "jetmoe": 2e-3, "qwen3_next": 1e-4}


@pytest.fixture(scope="session")
def int8_cache(converted):
    """family -> (hf_model, model.bin converted with --kv-int8)."""
    from colibri_tools.converter.convert import convert

    made: dict[str, tuple] = {}

    def get(family: str):
        if family not in made:
            model, image = converted(family)
            out = image.parent.parent / "kv_int8"
            convert(image.parent.parent / "hf", out, context=64, progress=False, kv_int8=True)
            made[family] = (model, out / "model.bin")
        return made[family]

    return get


@pytest.mark.parametrize("family", list(KV_FAMILIES))
def test_int8_cache_near_transformers(family, int8_cache, colibri_run, tmp_path):
    model, image = int8_cache(family)
    top1, kl = near_transformers(model, image, colibri_run, tmp_path)
    record(family, "kv_int8_mean_kl", kl)
    assert top1 >= 0.97 and kl <= KV_FAMILIES[family], (top1, kl)


@pytest.mark.parametrize("family", ["olmoe", "gpt_oss", "jetmoe"])
def test_int8_cache_bit_identical(family, int8_cache, colibri_run, tmp_path):
    """Every table this CPU runs, threads and chunks against the reference
    kernels, one thread, one token at a time."""
    model, image = int8_cache(family)
    runs = [("--threads", "2", "--batch", "7"), ("--threads", "3", "--batch", "40"),
            *(("--kernels", t, "--batch", "32") for t in runnable())]
    assert_same_bits(colibri_run, image, model.config.vocab_size, tmp_path, runs)


def test_int8_cache_state_is_smaller(int8_cache, converted):
    """One KV head of 22: per position 4 + 24 bytes (a scale, the int8 padded
    to whole floats) against 88, in colibri_state_size (the engine's) and
    model_config.h."""
    from colibri_tools.runtime.engine import Engine

    _, plain = converted("olmoe")
    _, small = int8_cache("olmoe")
    sizes = []
    for image in (plain, small):
        with Engine(image, context=64) as engine:
            sizes.append(engine.state_bytes)
        header = (image.parent / "model_config.h").read_text()
        assert re.search(rf"#define COLIBRI_MODEL_STATE_BYTES +{engine.state_bytes}u\n", header)
    assert re.search(r"#define COLIBRI_MODEL_KV_INT8 +1u\n",
                     (small.parent / "model_config.h").read_text())
    assert small.read_bytes()[10] == 15  # version_minor
    assert 3.0 < sizes[0] / sizes[1] < 4.0, sizes


def test_mla_models_are_refused(converted, tmp_path):
    from colibri_tools.converter.convert import convert

    _, image = converted("deepseek_v2")
    with pytest.raises(OptionError, match="MLA"):
        convert(image.parent.parent / "hf", tmp_path / "out", context=64, progress=False,
                kv_int8=True)


def test_int8_flag_on_an_mla_image_is_refused_by_both_readers(converted, tmp_path):
    """An MLA image with the KV_INT8 flag (bit 6 of the header's flags, at
    byte 28): COLIBRI_E_BAD_HYPERPARAMS from colibri_init and the tools' reader."""
    from colibri_tools.errors import ImageFormatError
    from colibri_tools.image.image_reader import fix_meta_crc, read_image
    from colibri_tools.runtime.engine import Engine, EngineError

    _, image = converted("deepseek_v2")
    data = bytearray(image.read_bytes())
    data[28] |= 64
    fix_meta_crc(data)
    bad = tmp_path / "mla_int8.bin"
    bad.write_bytes(data)
    with pytest.raises(EngineError) as core:
        Engine(bad, context=8)
    assert core.value.status == "COLIBRI_E_BAD_HYPERPARAMS"
    with pytest.raises(ImageFormatError) as tools:
        read_image(bytes(data))
    assert tools.value.status == "COLIBRI_E_BAD_HYPERPARAMS"
