"""The model record's limits, one table per language: sdk/src/hparams.c (with
COLIBRI_MAX_TOP_K / COLIBRI_MAX_CONTEXT from the public header) and
colibri_tools.image.image_spec.LIMITS must be equal."""
from __future__ import annotations

import re
from pathlib import Path

from colibri_tools.image.image_spec import LIMITS

REPO = Path(__file__).resolve().parents[2]
C_NAMES = {"MAX_VOCAB": "vocab_size", "MAX_HIDDEN": "hidden_size", "MAX_LAYERS": "n_layers",
           "MAX_HEADS": "n_heads", "MAX_HEAD_DIM": "head_dim", "MAX_CONTEXT": "max_context",
           "MAX_INTERMEDIATE": "intermediate", "MAX_EXPERTS": "n_experts"}


def _c_value(text: str, public: dict[str, int]) -> int:
    text = text.strip()
    if text in public:
        return public[text]
    m = re.fullmatch(r"\(?(\d+)u?(?: << (\d+))?\)?", text)
    assert m, f"cannot read the C limit {text!r}"
    return int(m.group(1)) << int(m.group(2) or 0)


def test_c_and_python_limits_are_equal():
    header = (REPO / "sdk" / "include" / "colibri.h").read_text()
    public = {name: _c_value(value, {}) for name, value in
              re.findall(r"#define (COLIBRI_MAX_\w+) (.+)", header)}
    source = (REPO / "sdk" / "src" / "hparams.c").read_text()
    c_limits = {C_NAMES[name]: _c_value(value, public)
                for name, value in re.findall(r"#define (MAX_\w+) (.+)", source)
                if name in C_NAMES}
    c_limits["top_k"] = public["COLIBRI_MAX_TOP_K"]
    assert set(c_limits) == set(C_NAMES.values()) | {"top_k"}
    assert c_limits == LIMITS


def test_batch_limit_is_the_headers():
    from colibri_tools.image.sizes import MAX_BATCH
    header = (REPO / "sdk" / "include" / "colibri.h").read_text()
    value = re.search(r"#define COLIBRI_MAX_BATCH (.+)", header).group(1)
    assert _c_value(value, {}) == MAX_BATCH


def test_float_bounds_of_the_record_are_equal():
    """rope_theta >= MIN_ROPE_THETA, routed_scaling <= MAX_ROUTED_SCALING: the
    C reader's and the Python reader's."""
    from colibri_tools.image import image_layout
    source = (REPO / "sdk" / "src" / "hparams.c").read_text()
    c_floats = {name: float(value) for name, value in
                re.findall(r"#define ((?:MIN|MAX)_\w+) ([0-9.]+)f\b", source)}
    assert c_floats == {"MIN_ROPE_THETA": image_layout.MIN_ROPE_THETA,
                        "MAX_ROUTED_SCALING": image_layout.MAX_ROUTED_SCALING,
                        "MAX_SCALE": image_layout.MAX_SCALE,
                        "MAX_ROUTER_JITTER": image_layout.MAX_ROUTER_JITTER,
                        "MAX_ROUTER_NORM_MIN": image_layout.MAX_ROUTER_NORM_MIN,
                        "MAX_KDA_BOUND": image_layout.MAX_KDA_BOUND}
