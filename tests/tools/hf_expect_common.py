"""What the hf_expect_* modules read alike off a Hugging Face state dict: the
global tensors, each expert's matrices from transformers' fused stacks and config floats
(roles as docs/format.md's literal numbers)."""

from __future__ import annotations

from typing import Any

import numpy as np

GLOBAL = 0xFFFF


def f32(value: float) -> float:
    """A config's float as the image stores it: rounded to float32."""
    return float(np.float32(value))


def global_tensors(sd: dict, model: Any, embed: str = "model.embed_tokens.weight",
                   norm: str = "model.norm.weight", shift: float = 0.0) -> dict:
    """TOKEN_EMBED, OUTPUT_NORM (plus `shift`: zero-centred norms) and LM_HEAD."""
    out = {(1, GLOBAL, GLOBAL): sd[embed], (2, GLOBAL, GLOBAL): shift + sd[norm]}
    if not model.config.tie_word_embeddings:
        out[(3, GLOBAL, GLOBAL)] = sd["lm_head.weight"]
    return out


def fused_experts(gate_up: np.ndarray, down: np.ndarray, layer: int) -> dict:
    """Each expert's gate, up and down from gate_up [E, 2I, H] and down [E, H, I]."""
    inter = gate_up.shape[1] // 2
    out = {}
    for e in range(gate_up.shape[0]):
        out |= {(48, layer, e): gate_up[e, :inter], (49, layer, e): gate_up[e, inter:],
                (50, layer, e): down[e]}
    return out
