"""LongCat-Flash's tensors (tensor_map.py asks here for family "longcat_flash").

Decoder layer i of the checkpoint is image layers 2i and 2i + 1 (families_recent.py):
image layer 2i + j takes `model.layers.{i}.self_attn.{j}.*`, `input_layernorm.{j}`,
`post_attention_layernorm.{j}` and `mlps.{j}.*`; the MoE `mlp.*` belongs to image
layer 2i, the shortcut layer:

- `mlp.router.classifier.weight` [E + Z, H] and
  `mlp.router.e_score_correction_bias` [E + Z]: the zero-computation experts' rows
  after the routed ones', as the image's router has them.
- `mlp.experts.gate_up_proj` [E + Z, 2I, H] (gate rows, then up rows) and
  `mlp.experts.down_proj` [E, H, I], or per expert `mlp.experts.{e}.{gate,up,down}_proj`
  (save_pretrained writes gate and up for the Z too): the zero-computation experts'
  gate and up, which transformers never reads; neither does the image.
- `mlp.router.classifier.bias` [E + Z], written with router_bias: transformers
  creates it but its router never adds it (F.linear on the weight alone), so it
  is checked and passed over too.

The MLA's LoRA scales are folded in: q_b_proj times sqrt(hidden / q_lora_rank)
(transformers scales q_pass and q_rot, the whole query, by it) and
kv_a_layernorm's weight times sqrt(hidden / kv_lora_rank) (it scales the normed
latent, which the cache holds).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..image.image_spec import Role, TensorEntry
from .tensor_map_fused import TensorMap

Loader = Callable[[], np.ndarray]

_ATTENTION = {Role.MLA_Q_A: "q_a_proj.weight", Role.MLA_Q_A_NORM: "q_a_layernorm.weight",
              Role.MLA_Q_B: "q_b_proj.weight", Role.MLA_KV_A: "kv_a_proj_with_mqa.weight",
              Role.MLA_KV_A_NORM: "kv_a_layernorm.weight", Role.MLA_KV_B: "kv_b_proj.weight",
              Role.ATTN_O: "o_proj.weight"}
_MLP = {Role.DENSE_GATE: "gate_proj.weight", Role.DENSE_UP: "up_proj.weight",
        Role.DENSE_DOWN: "down_proj.weight"}
_MOE = {Role.ROUTER: "router.classifier.weight", Role.ROUTER_BIAS: "router.e_score_correction_bias"}
_NORMS = {Role.ATTN_NORM: "input_layernorm", Role.FFN_NORM: "post_attention_layernorm"}
PREDICTION_PREFIX = "model.mtp."  # its multi-token-prediction layers, unused by generation


def longcat_name(role: int, layer: int) -> str:
    """The checkpoint name of image layer `layer`'s tensor of `role`."""
    base, j = f"model.layers.{layer // 2}", layer % 2
    if role in _ATTENTION:
        return f"{base}.self_attn.{j}.{_ATTENTION[role]}"
    if role in _MLP:
        return f"{base}.mlps.{j}.{_MLP[role]}"
    if role in _NORMS:
        return f"{base}.{_NORMS[role]}.{j}.weight"
    return f"{base}.mlp.{_MOE[role]}"


def longcat_scaled(tmap: TensorMap, entry: TensorEntry, load: Loader) -> Loader:
    """The loader of `entry` with its LoRA scale folded in (the other tensors as
    they are)."""
    r = tmap.spec.record
    rank = {Role.MLA_Q_B: r.q_lora_rank, Role.MLA_KV_A_NORM: r.kv_lora_rank}.get(entry.role)
    if rank is None:
        return load
    scale = np.float32(math.sqrt(r.hidden_size / rank))
    return lambda: load() * scale


def _per_expert(tmap: TensorMap, block: str) -> list[tuple[Loader, Loader, Loader]]:
    """`{block}.{e}.{gate,up,down}_proj.weight` (save_pretrained's names); the
    zero-computation experts' gate and up, when written, are checked and passed over."""
    r = tmap.spec.record
    inter, hidden = r.expert_intermediate, r.hidden_size
    out = []
    for e in range(r.router_width):
        gate, up, down = (f"{block}.{e}.{part}_proj.weight" for part in ("gate", "up", "down"))
        if e >= r.n_experts and not tmap.ckpt.has(gate):
            continue
        tmap._expect(gate, (inter, hidden))
        tmap._expect(up, (inter, hidden))
        if e < r.n_experts:
            tmap._expect(down, (hidden, inter))
            out.append((lambda n=gate: tmap._load(n), lambda n=up: tmap._load(n),
                        lambda n=down: tmap._load(n)))
    return out


def longcat_experts(tmap: TensorMap, layer: int) -> list[tuple[Loader, Loader, Loader]]:
    """The routed experts of shortcut layer `layer`: gate and up from
    gate_up_proj's first E blocks, down from down_proj (or per expert)."""
    r = tmap.spec.record
    e_count, inter, hidden = r.n_experts, r.expert_intermediate, r.hidden_size
    block = f"model.layers.{layer // 2}.mlp.experts"
    unused_bias = f"model.layers.{layer // 2}.mlp.router.classifier.bias"
    if tmap.ckpt.has(unused_bias):
        tmap._expect(unused_bias, (r.router_width,))
    gate_up, down = f"{block}.gate_up_proj", f"{block}.down_proj"
    if not tmap.ckpt.has(gate_up):
        return _per_expert(tmap, block)
    tmap._expect(gate_up, (r.router_width, 2 * inter, hidden))
    tmap._expect(down, (e_count, hidden, inter))
    return [(lambda e=e: tmap._load(gate_up, e, slice(0, inter)),
             lambda e=e: tmap._load(gate_up, e, slice(inter, 2 * inter)),
             lambda e=e: tmap._load(down, e)) for e in range(e_count)]
