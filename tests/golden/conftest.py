"""Fixtures for the golden tests: a converted tiny model per family, and
colibri-run as the engine under test. Transformers is the oracle."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

FAMILIES = ["mixtral", "qwen2_moe", "qwen2_moe_norm", "olmoe", "qwen3_moe", "switch"]
REPORT = REPO / "build" / "golden_report.json"


@pytest.fixture(scope="session")
def colibri_run() -> pathlib.Path:
    subprocess.run(["make", "-s", "host"], cwd=REPO, check=True)
    return REPO / "build" / "host" / "colibri-run"


def _family_args(family: str) -> tuple[str, dict]:
    if family == "qwen2_moe_norm":
        return "qwen2_moe", {"norm_topk_prob": True}
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


def run_engine(binary: pathlib.Path, image: pathlib.Path, ids: list[int], *, gen: int = 0,
               logits_path: pathlib.Path | None = None, vocab: int = 0,
               extra: tuple[str, ...] = ()) -> tuple[list[int], np.ndarray | None]:
    cmd = [str(binary), str(image), "--ids", ",".join(map(str, ids)), "--gen", str(gen),
           "--context", "64", *extra]
    if logits_path is not None:
        cmd += ["--all-logits", str(logits_path)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    generated = [int(t) for t in done.stdout.split()]
    logits = None
    if logits_path is not None:
        logits = np.fromfile(logits_path, dtype="<f4").reshape(len(ids), vocab)
    return generated, logits


def record(family: str, key: str, value: float) -> None:
    """Keep the worst difference seen per family for the docs and notes."""
    REPORT.parent.mkdir(exist_ok=True)
    data = json.loads(REPORT.read_text()) if REPORT.exists() else {}
    entry = data.setdefault(family, {})
    entry[key] = max(value, entry.get(key, 0.0))
    REPORT.write_text(json.dumps(data, indent=1, sort_keys=True))
