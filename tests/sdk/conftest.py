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
    subprocess.run(["make", "-s", "test-bins"], cwd=REPO, check=True)
    return REPO / "build" / "asan"


@pytest.fixture(scope="session")
def valid_image(tmp_path_factory) -> pathlib.Path:
    from colibri_tools.convert import convert
    from hf_models import build_model, save_checkpoint

    root = tmp_path_factory.mktemp("valid")
    model, _ = build_model("qwen2_moe", seed=3)
    save_checkpoint(model, root / "hf")
    convert(root / "hf", root / "out", context=64, progress=False)
    return root / "out" / "model.bin"
