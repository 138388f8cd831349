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
from hf_models import VARIANTS  # noqa: E402


@pytest.fixture(scope="session")
def colibri_run() -> pathlib.Path:
    subprocess.run(["make", "-s", "host"], cwd=REPO, check=True)
    return REPO / "build" / "host" / "colibri-run"


def _family_args(family: str) -> tuple[str, dict]:
    return VARIANTS.get(family, (family, {}))


@pytest.fixture(scope="session")
def converted(tmp_path_factory):
    """family -> (hf_model, model.bin path), built once per session."""
    from colibri_tools.converter.convert import convert
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
    "+attention" appended, the attention projections too, with "+embeddings"
    the token embedding and LM head; with "+rows16" in groups of 16 rows
    (colibri-convert --row-groups)."""
    from colibri_tools.converter.convert import convert

    cache: dict[tuple[str, str], tuple] = {}

    def get(family: str, quant: str):
        if (family, quant) not in cache:
            model, image = converted(family)
            root = image.parent.parent
            bits, *parts = quant.split("+")
            out = root / quant.replace("+", "_")
            convert(root / "hf", out, context=64, progress=False, quant=bits,
                    quant_attention="attention" in parts, quant_embeddings="embeddings" in parts,
                    row_groups="rows16" in parts)
            cache[family, quant] = (model, out / "model.bin")
        return cache[family, quant]

    return get


@pytest.fixture(scope="session")
def experts_last(converted):
    """(family, quant) -> the family's tiny model converted with --experts-last
    (format 1.9): float32 (quant None), or int4 in row groups with the
    attention projections."""
    from colibri_tools.converter.convert import convert

    made = {}

    def get(family: str, quant: str | None):
        if (family, quant) not in made:
            root = converted(family)[1].parent.parent
            out = root / f"experts_last_{quant or 'f32'}"
            convert(root / "hf", out, context=64, progress=False, quant=quant,
                    quant_attention=quant is not None, experts_last=True)
            made[family, quant] = out / "model.bin"
        return made[family, quant]

    return get
