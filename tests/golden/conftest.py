"""Fixtures for the golden tests: a converted tiny model per family, and
colibri-run as the engine under test. Transformers is the oracle."""
from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from golden_helpers import FAMILIES, REPO  # noqa: E402

GPT_OSS_YARN = {"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0, "beta_fast": 32.0,
                "beta_slow": 1.0, "truncate": False, "original_max_position_embeddings": 16}
GLM_YARN = {"rope_type": "yarn", "rope_theta": 1e4, "partial_rotary_factor": 0.5, "factor": 4.0,
            "original_max_position_embeddings": 16}


@pytest.fixture(scope="session")
def colibri_run() -> pathlib.Path:
    subprocess.run(["make", "-s", "host"], cwd=REPO, check=True)
    return REPO / "build" / "host" / "colibri-run"


def _family_args(family: str) -> tuple[str, dict]:
    if family == "qwen2_moe_norm":
        return "qwen2_moe", {"norm_topk_prob": True}
    if family == "glm4_moe_yarn":  # YaRN with an original context shorter than the test's 40
        return "glm4_moe", {"rope_parameters": GLM_YARN, "max_position_embeddings": 64}
    if family == "gpt_oss_yarn":  # gpt-oss's own YaRN kind (truncate false), original 16 < 40
        return "gpt_oss", {"rope_parameters": GPT_OSS_YARN}
    return family, {}


@pytest.fixture(scope="session")
def converted(tmp_path_factory):
    """family -> (hf_model, model.bin path), built once per session."""
    from colibri_tools.convert import convert
    from hf_models import build_model, save_checkpoint

    cache: dict[str, tuple] = {}

    def get(family: str):
        if family not in cache:
            base, overrides = _family_args(family)
            model, _config = build_model(base, seed=FAMILIES.index(family), **overrides)
            root = tmp_path_factory.mktemp(family)
            save_checkpoint(model, root / "hf")
            convert(root / "hf", root / "out", context=64, progress=False)
            cache[family] = (model, root / "out" / "model.bin")
        return cache[family]

    return get


@pytest.fixture(scope="session")
def quantized(converted):
    """(family, quant) -> (hf_model, model.bin path): the model of `converted`
    with its feed-forward matrices stored Q8 ("int8") or Q4 ("int4"); with
    "+attention" appended, the attention projections too."""
    from colibri_tools.convert import convert

    cache: dict[tuple[str, str], tuple] = {}

    def get(family: str, quant: str):
        if (family, quant) not in cache:
            model, image = converted(family)
            root = image.parent.parent
            bits, _, attention = quant.partition("+")
            out = root / quant.replace("+", "_")
            convert(root / "hf", out, context=64, progress=False, quant=bits,
                    quant_attention=attention == "attention")
            cache[family, quant] = (model, out / "model.bin")
        return cache[family, quant]

    return get
