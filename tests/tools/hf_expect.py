"""Golden values for converter tests, taken from the Hugging Face model objects
(modules, parameters, config) and from docs/format.md, never from the converter.

Roles and arch ids are spelled as the literal numbers of docs/format.md so a
wrong constant in the tools package cannot hide here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

GLOBAL = 0xFFFF
ARCH = {"mixtral": 1, "qwen2_moe": 2, "olmoe": 3, "qwen3_moe": 4, "switch": 5}
# family -> qk_norm kind (1: whole projection, OLMoE; 2: per head, Qwen3-MoE)
QK_NORM = {"mixtral": 0, "qwen2_moe": 0, "olmoe": 1, "qwen3_moe": 2, "switch": 0}


def _is_moe(layer: Any) -> bool:
    return hasattr(layer.mlp, "experts")


def _shared_width(family: str, mlp: Any) -> int:
    if family == "switch" or not hasattr(mlp, "shared_expert"):
        return 0
    return mlp.shared_expert.gate_proj.out_features


def expected_record(model: Any, family: str) -> dict[str, Any]:
    """Model record fields (docs/format.md 1.1) read off the HF modules and config."""
    config = model.config
    layers = model.model.layers
    attn = layers[0].self_attn
    moe = [layer for layer in layers if _is_moe(layer)]
    dense = [layer for layer in layers if not _is_moe(layer)]
    biases = [attn.q_proj.bias, attn.k_proj.bias, attn.v_proj.bias, attn.o_proj.bias]
    shared = _shared_width(family, moe[0].mlp) if moe else 0
    return {
        "arch": ARCH[family], "vocab_size": config.vocab_size, "hidden_size": config.hidden_size,
        "n_layers": len(layers), "n_heads": config.num_attention_heads,
        "n_kv_heads": config.num_key_value_heads, "head_dim": attn.head_dim,
        "max_context": config.max_position_embeddings,
        "dense_intermediate": dense[0].mlp.gate_proj.out_features if dense else 0,
        "expert_intermediate": moe[0].mlp.experts.intermediate_dim if moe else 0,
        "n_experts": moe[0].mlp.experts.num_experts if moe else 0,
        "shared_intermediate": shared,
        "rms_eps": float(np.float32(config.rms_norm_eps)),
        "rope_theta": float(np.float32(config.rope_parameters["rope_theta"])),
        "attn_bias": sum(1 << i for i, b in enumerate(biases) if b is not None),
        "qk_norm": QK_NORM[family], "tie_embeddings": int(bool(config.tie_word_embeddings)),
        "router_score": 0, "top_k": moe[0].mlp.gate.top_k if moe else 0,
        "router_norm_topk": int(getattr(moe[0].mlp.gate, "norm_topk_prob", True)) if moe else 0,
        "routed_scaling": 1.0, "shared_gate": int(shared > 0), "n_group": 1, "topk_group": 1,
        "activation": 0, "norm_kind": 0,
        "ffn_kinds": [1 if _is_moe(layer) else 0 for layer in layers],
    }


def _attention_tensors(sd: dict, p: str, layer: int) -> dict:
    names = {16: "input_layernorm.weight", 17: "self_attn.q_proj.weight",
             18: "self_attn.k_proj.weight", 19: "self_attn.v_proj.weight",
             20: "self_attn.o_proj.weight", 21: "self_attn.q_proj.bias",
             22: "self_attn.k_proj.bias", 23: "self_attn.v_proj.bias",
             24: "self_attn.o_proj.bias", 25: "self_attn.q_norm.weight",
             26: "self_attn.k_norm.weight", 27: "post_attention_layernorm.weight"}
    return {(role, layer, GLOBAL): sd[p + n] for role, n in names.items() if p + n in sd}


def _ffn_tensors(sd: dict, p: str, layer: int, family: str) -> dict:
    if p + "mlp.experts.gate_up_proj" not in sd:
        return {(role, layer, GLOBAL): sd[f"{p}mlp.{n}_proj.weight"]
                for role, n in ((32, "gate"), (33, "up"), (34, "down"))}
    out = {(40, layer, GLOBAL): sd[p + "mlp.gate.weight"]}
    if family == "qwen2_moe":
        out |= {(role, layer, GLOBAL): sd[f"{p}mlp.shared_expert.{n}_proj.weight"]
                for role, n in ((41, "gate"), (42, "up"), (43, "down"))}
        out[(44, layer, GLOBAL)] = sd[p + "mlp.shared_expert_gate.weight"]
    gate_up, down = sd[p + "mlp.experts.gate_up_proj"], sd[p + "mlp.experts.down_proj"]
    inter = gate_up.shape[1] // 2
    for e in range(gate_up.shape[0]):
        out[(48, layer, e)] = gate_up[e, :inter]
        out[(49, layer, e)] = gate_up[e, inter:]
        out[(50, layer, e)] = down[e]
    return out


def expected_tensors(model: Any, family: str, dtype: torch.dtype = torch.float32) -> dict:
    """(role, layer, expert) -> float32 array, from the in-memory (fused) parameters,
    rounded through `dtype` first."""
    sd = {k: v.detach().to(dtype).float().numpy() for k, v in model.state_dict().items()}
    out = {(1, GLOBAL, GLOBAL): sd["model.embed_tokens.weight"],
           (2, GLOBAL, GLOBAL): sd["model.norm.weight"]}
    if not model.config.tie_word_embeddings:
        out[(3, GLOBAL, GLOBAL)] = sd["lm_head.weight"]
    for layer in range(model.config.num_hidden_layers):
        p = f"model.layers.{layer}."
        out |= _attention_tensors(sd, p, layer) | _ffn_tensors(sd, p, layer, family)
    return out


def hf_logits(model: Any, ids: list[int]) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].double().numpy()
