"""Fixtures for the core's tests: the sanitized test programs and one valid
image (a converted tiny Qwen2-MoE: biases, shared expert, a dense layer)."""
from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "sdk"))


@pytest.fixture(scope="session")
def asan_bins() -> pathlib.Path:
    subprocess.run(["make", "-s", "-j2", "test-bins"], cwd=REPO, check=True)
    return REPO / "build" / "asan"


@pytest.fixture(scope="session")
def valid_image(tmp_path_factory) -> pathlib.Path:
    from colibri_tools.converter.convert import convert
    from hf_models import build_model, save_checkpoint

    root = tmp_path_factory.mktemp("valid")
    model, _ = build_model("qwen2_moe", seed=3)
    save_checkpoint(model, root / "hf")
    convert(root / "hf", root / "out", context=64, progress=False)
    return root / "out" / "model.bin"


@pytest.fixture(scope="session")
def valid_experts_last_image(valid_image) -> pathlib.Path:
    """The same tiny Qwen2-MoE with every expert block after the other tensors'
    data (format 1.9, EXPERTS_LAST)."""
    from colibri_tools.converter.convert import convert

    root = valid_image.parent.parent
    convert(root / "hf", root / "experts_last", context=64, progress=False, experts_last=True)
    return root / "experts_last" / "model.bin"


@pytest.fixture(scope="session")
def valid_mla_image(tmp_path_factory) -> pathlib.Path:
    """A tiny DeepSeek-V3: Multi-head Latent Attention, whose KV state holds the
    latent and the RoPE key (format 1.6)."""
    from colibri_tools.converter.convert import convert
    from hf_models import build_model, save_checkpoint

    root = tmp_path_factory.mktemp("valid_mla")
    model, _ = build_model("deepseek_v3", seed=3)
    save_checkpoint(model, root / "hf")
    convert(root / "hf", root / "out", context=64, progress=False)
    return root / "out" / "model.bin"


@pytest.fixture(scope="session")
def valid_family_images(tmp_path_factory) -> list[pathlib.Path]:
    """Tiny PhiMoE, ERNIE-4.5, gpt-oss, LFM2-MoE and Granite-4.0-H images (LayerNorm
    and sparsemixer; the biased softmax router; sinks, sliding window, biases and
    clamped SwiGLU; the 512-byte header and short convolution layers; Mamba2 layers)."""
    from colibri_tools.converter.convert import convert
    from hf_models import build_model, save_checkpoint

    out = []
    for family in ("phimoe", "ernie4_5_moe", "gpt_oss", "lfm2_moe", "granitemoehybrid"):
        root = tmp_path_factory.mktemp(f"valid_{family}")
        model, _ = build_model(family, seed=3)
        save_checkpoint(model, root / "hf")
        convert(root / "hf", root / "out", context=64, progress=False)
        out.append(root / "out" / "model.bin")
    return out


@pytest.fixture(scope="session")
def valid_q8_image(tmp_path_factory) -> pathlib.Path:
    """The same tiny Qwen2-MoE with its feed-forward matrices Q8 (format 1.3)."""
    return _quantized_image(tmp_path_factory, "int8")


@pytest.fixture(scope="session")
def valid_q4_image(tmp_path_factory) -> pathlib.Path:
    """The same tiny Qwen2-MoE with every matrix but the routers Q4 (feed-forward,
    attention, embedding and LM head)."""
    return _quantized_image(tmp_path_factory, "int4", attention=True)


@pytest.fixture(scope="session")
def valid_r16_image(tmp_path_factory) -> pathlib.Path:
    """The Q4 image above with its matrices (but the token embedding) in groups
    of 16 rows (format 1.8: Q4_R16, and Q8_R16 for K, V and the LM head)."""
    return _quantized_image(tmp_path_factory, "int4", attention=True, row_groups=True)


@pytest.fixture(scope="session")
def valid_qk_image(tmp_path_factory) -> pathlib.Path:
    """The same tiny Qwen2-MoE with its matrices (but the token embedding)
    QK3 super-blocks (format 1.15: QK6 for K, V and the LM head), each row's
    one super-block padded past the model's 36 columns."""
    return _quantized_image(tmp_path_factory, "qk3", attention=True)


@pytest.fixture(scope="session")
def valid_qk_r16_image(tmp_path_factory) -> pathlib.Path:
    """The QK3 image above in groups of 16 rows (format 1.16: QK3_R16, QK6_R16
    for K, V and the LM head; the token embedding Q8), each matrix's last
    group padded (the experts' 12 rows: 4 padding rows)."""
    return _quantized_image(tmp_path_factory, "qk3", attention=True, row_groups=True)


def _quantized_image(tmp_path_factory, quant: str, attention: bool = False,
                     row_groups: bool = False) -> pathlib.Path:
    from colibri_tools.converter.convert import convert
    from hf_models import build_model, save_checkpoint

    root = tmp_path_factory.mktemp(f"valid_{quant}")
    model, _ = build_model("qwen2_moe", seed=3)
    save_checkpoint(model, root / "hf")
    convert(root / "hf", root / "out", context=64, progress=False, quant=quant,
            quant_attention=attention, quant_embeddings=attention, row_groups=row_groups)
    return root / "out" / "model.bin"
