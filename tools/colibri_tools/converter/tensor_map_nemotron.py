"""Nemotron-H's tensors (tensor_map.py asks here for family "nemotron_h"; the
record: families_nemotron_h.py). Its checkpoints keep the model under
`backbone.`, the embedding as `embeddings` and the final norm as `norm_f`
(NEMOTRON_NAMES renames them as transformers does in memory). Each block
`model.layers.{l}` has one `norm` (the ATTN_NORM of a Mamba2 or attention
block, the FFN_NORM of a MoE or MLP block) and one `mixer`: a Mamba2 mixer
(tensor_map_mamba2.py), attention (q/k/v/o_proj), a MoE (gate.weight, its
e_score_correction_bias, experts.{e}.up_proj / down_proj, or up_proj /
down_proj stacked [E, ...] in memory, shared_experts.up_proj / down_proj) or an
MLP (up_proj, down_proj): relu^2, no gate matrices.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..image.image_spec import ATTN_MAMBA2, Role, TensorEntry
from .tensor_map_fused import TensorMap
from .tensor_map_mamba2 import mamba2_tensor

Loader = Callable[[], np.ndarray]

_RENAMES = (("backbone.", "model."), ("model.embeddings.", "model.embed_tokens."),
            ("model.norm_f.", "model.norm."))
_MIXER = {Role.ATTN_Q: "q_proj.weight", Role.ATTN_K: "k_proj.weight", Role.ATTN_V: "v_proj.weight",
          Role.ATTN_O: "o_proj.weight", Role.ROUTER: "gate.weight",
          Role.ROUTER_BIAS: "gate.e_score_correction_bias",
          Role.SHARED_UP: "shared_experts.up_proj.weight",
          Role.SHARED_DOWN: "shared_experts.down_proj.weight",
          Role.DENSE_UP: "up_proj.weight", Role.DENSE_DOWN: "down_proj.weight"}


def nemotron_name(name: str) -> str:
    """A Nemotron-H checkpoint's tensor under transformers' in-memory name."""
    for saved, memory in _RENAMES:
        if name.startswith(saved):
            name = memory + name[len(saved):]
    return name


def nemotron_h_tensor(tmap: TensorMap, entry: TensorEntry) -> Loader | None:
    """The loader of a Nemotron-H layer tensor (None: the usual one)."""
    base = f"model.layers.{entry.layer}"
    if entry.role in (Role.ATTN_NORM, Role.FFN_NORM):
        name = f"{base}.norm.weight"
    elif entry.role in _MIXER:
        name = f"{base}.mixer.{_MIXER[entry.role]}"
    else:
        kinds = tmap.spec.attn_kinds or []
        if entry.layer < len(kinds) and kinds[entry.layer] == ATTN_MAMBA2:
            return mamba2_tensor(tmap, entry, module="mixer")
        return None
    return tmap._stored(name, entry.shape)


def nemotron_h_experts(tmap: TensorMap, layer: int) -> list[tuple[None, Loader, Loader]]:
    """Each expert's (no gate, up, down): per expert as saved, or stacked in memory."""
    r = tmap.spec.record
    e_count, inter, hidden = r.n_experts, r.expert_intermediate, r.hidden_size
    block = f"model.layers.{layer}.mixer.experts"
    if tmap.ckpt.has(f"{block}.up_proj"):
        tmap._expect(f"{block}.up_proj", (e_count, inter, hidden))
        tmap._expect(f"{block}.down_proj", (e_count, hidden, inter))
        return [(None, lambda e=e: tmap._load(f"{block}.up_proj", e),
                 lambda e=e: tmap._load(f"{block}.down_proj", e)) for e in range(e_count)]
    out = []
    for e in range(e_count):
        up, down = f"{block}.{e}.up_proj.weight", f"{block}.{e}.down_proj.weight"
        tmap._expect(up, (inter, hidden))
        tmap._expect(down, (hidden, inter))
        out.append((None, lambda n=up: tmap._load(n), lambda n=down: tmap._load(n)))
    return out
