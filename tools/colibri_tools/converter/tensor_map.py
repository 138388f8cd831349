"""Which checkpoint tensor fills which image role (docs/format.md 3.1).

Both expert layouts are accepted, per layer:

- per-expert (what `save_pretrained` writes): `{block}.experts.{e}.gate_proj.weight`,
  `up_proj`, `down_proj` (Mixtral: `w1` gate, `w3` up, `w2` down), with block
  `mlp` or Mixtral's `block_sparse_moe`;
- fused (transformers 5 in memory): `{block}.experts.gate_up_proj` [E, 2I, H]
  (gate = first I rows, up = last I rows) and `{block}.experts.down_proj` [E, H, I];
  Granite's checkpoints name them `{block}.input_linear.weight` and
  `{block}.output_linear.weight`, its router `{block}.router.layer.weight` and its
  shared MLP `shared_mlp.input_linear` [2S, H] (gate, up) / `shared_mlp.output_linear`.

Every shape is checked before anything is written, and every checkpoint tensor
must be used: a stray tensor (a bias the config does not announce, say) means
the mapping and the checkpoint disagree, and is an error rather than a silent
omission.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import CheckpointError
from ..image.image_spec import (
    NORM_RMS_POST,
    NORM_RMS_SANDWICH,
    QK_NORM_PER_HEAD_ROTATED,
    Role,
    TensorEntry,
)
from ..image.image_writer import SourceTensor
from ..image.layer_shapes import canonical_tensors
from .checkpoint import Checkpoint
from .families import ModelSpec
from .tensor_map_fused import dbrx_experts, dbrx_tensor, jetmoe_tensor
from .tensor_map_gated_delta import qwen3_next_tensor
from .tensor_map_kda import kimi_linear_tensor
from .tensor_map_lfm2 import lfm2_name, lfm2_tensor
from .tensor_map_longcat import PREDICTION_PREFIX, longcat_experts, longcat_name, longcat_scaled
from .tensor_map_mamba2 import jamba_tensor, mamba2_tensor
from .tensor_map_mimo import mimo_tensor
from .tensor_map_nemotron import nemotron_h_experts, nemotron_h_tensor

_DENSE_ROLES = (Role.DENSE_GATE, Role.DENSE_UP, Role.DENSE_DOWN)
_SHARED_ROLES = (Role.SHARED_GATE, Role.SHARED_UP, Role.SHARED_DOWN)


def _swiglu_names(roles: tuple[Role, Role, Role], module: str) -> dict[Role, str]:
    """The gate, up and down roles named `{module}.{gate,up,down}_proj.weight`."""
    return {role: f"{module}.{part}_proj.weight" for role, part in zip(roles, ("gate", "up", "down"))}


_GLOBAL_NAMES = {Role.TOKEN_EMBED: "model.embed_tokens.weight",
                 Role.OUTPUT_NORM: "model.norm.weight", Role.LM_HEAD: "lm_head.weight",
                 Role.OUTPUT_NORM_BIAS: "model.norm.bias", Role.LM_HEAD_BIAS: "lm_head.bias"}

_LAYER_NAMES = {
    Role.ATTN_NORM: "input_layernorm.weight", Role.ATTN_Q: "self_attn.q_proj.weight",
    Role.ATTN_K: "self_attn.k_proj.weight", Role.ATTN_V: "self_attn.v_proj.weight",
    Role.ATTN_O: "self_attn.o_proj.weight", Role.ATTN_Q_BIAS: "self_attn.q_proj.bias",
    Role.ATTN_K_BIAS: "self_attn.k_proj.bias", Role.ATTN_V_BIAS: "self_attn.v_proj.bias",
    Role.ATTN_O_BIAS: "self_attn.o_proj.bias", Role.ATTN_Q_NORM: "self_attn.q_norm.weight",
    Role.ATTN_K_NORM: "self_attn.k_norm.weight", Role.FFN_NORM: "post_attention_layernorm.weight",
    **_swiglu_names(_DENSE_ROLES, "mlp"), Role.ATTN_NORM_BIAS: "input_layernorm.bias",
    Role.FFN_NORM_BIAS: "post_attention_layernorm.bias", Role.ATTN_SINKS: "self_attn.sinks",
    Role.MLA_Q_A: "self_attn.q_a_proj.weight", Role.MLA_Q_A_NORM: "self_attn.q_a_layernorm.weight",
    Role.MLA_Q_B: "self_attn.q_b_proj.weight",
    Role.MLA_KV_A: "self_attn.kv_a_proj_with_mqa.weight",
    Role.MLA_KV_A_NORM: "self_attn.kv_a_layernorm.weight",
    Role.MLA_KV_B: "self_attn.kv_b_proj.weight", Role.ATTN_GATE: "self_attn.gate_proj.weight",
}

# OLMo-2's norms (norm_kind 2, FlexOlmo): the one after the attention and the one
# after the MLP, in the attention's and the MLP's norm roles.
_POST_NORM_NAMES = {Role.ATTN_NORM: "post_attention_layernorm.weight",
                    Role.FFN_NORM: "post_feedforward_layernorm.weight"}

# AFMoE's four norms (norm_kind 3): before and after the attention, before and after
# the MLP.
_SANDWICH_NORM_NAMES = {Role.FFN_NORM: "pre_mlp_layernorm.weight",
                        Role.ATTN_POST_NORM: "post_attention_layernorm.weight",
                        Role.FFN_POST_NORM: "post_mlp_layernorm.weight"}

# Llama 4: the FFN is `feed_forward`, its dense layers' too.
_LLAMA4_DENSE_NAMES = _swiglu_names(_DENSE_ROLES, "feed_forward")

# Hunyuan: q/k norms named for their place (qk_norm 3, after RoPE); an ungated
# shared MLP.
_ROTATED_QK_NORM_NAMES = {Role.ATTN_Q_NORM: "self_attn.query_layernorm.weight",
                          Role.ATTN_K_NORM: "self_attn.key_layernorm.weight"}
_HUNYUAN_BLOCK_NAMES = _swiglu_names(_SHARED_ROLES, "shared_mlp")

_BLOCK_NAMES = {Role.ROUTER: "gate.weight", **_swiglu_names(_SHARED_ROLES, "shared_expert"),
                Role.SHARED_EXPERT_GATE: "shared_expert_gate.weight"}
# ERNIE-4.5: `shared_experts` (plural), and the selection bias under the router
# (transformers' memory) or beside it (its checkpoints).
_ERNIE_BLOCK_NAMES = _swiglu_names(_SHARED_ROLES, "shared_experts")
# gpt-oss: the router's own bias; the experts' biases, gate and up interleaved.
_GPT_OSS_BLOCK_NAMES = {Role.ROUTER_LOGIT_BIAS: "router.bias",
                        Role.EXPERT_GATE_UP_BIAS: "experts.gate_up_proj_bias",
                        Role.EXPERT_DOWN_BIAS: "experts.down_proj_bias"}
_ROUTER_BIAS_NAMES = ("gate.moe_statics.e_score_correction_bias",
                      "moe_statics.e_score_correction_bias",
                      "gate.e_score_correction_bias",  # DeepSeek-V3, GLM-4.5, dots1
                      "e_score_correction_bias",  # MiniMax-M2
                      "expert_bias")  # AFMoE

_MOE_BLOCKS = ("mlp", "block_sparse_moe", "feed_forward")  # feed_forward: Llama 4
# Router names: most families' `{block}.gate.weight`; Granite's `router.layer.weight`
# on disk (`router.weight` in transformers 5's memory).
_ROUTER_NAMES = ("gate.weight", "router.layer.weight", "router.weight", "gate.wg.weight",
                 "router.gate.weight")
_PER_EXPERT_NAMES = (("gate_proj", "up_proj", "down_proj"), ("w1", "w3", "w2"))
_IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)
# Tensors whose rows are the rotated q and k dimensions.
_ROPE_ROLES = (Role.ATTN_Q, Role.ATTN_K, Role.ATTN_Q_BIAS, Role.ATTN_K_BIAS)

Loader = Callable[[], np.ndarray]


def _deinterleave(array: np.ndarray, axis: int) -> np.ndarray:
    """[..., 2I, ...] with gate and up alternating along `axis` -> gate block, up block."""
    gate = np.take(array, np.arange(0, array.shape[axis], 2), axis=axis)
    up = np.take(array, np.arange(1, array.shape[axis], 2), axis=axis)
    return np.ascontiguousarray(np.concatenate([gate, up], axis=axis))


class TensorMap:
    """Resolves every tensor of a ModelSpec to a loader over a Checkpoint."""

    def __init__(self, checkpoint: Checkpoint, spec: ModelSpec) -> None:
        self.ckpt = checkpoint
        self.spec = spec
        self.used: set[str] = set()

    # -- names -------------------------------------------------------------
    def _router(self, layer: int) -> tuple[str, str]:
        """(block prefix, router tensor name) of a MoE layer."""
        for block in _MOE_BLOCKS:
            for suffix in _ROUTER_NAMES:
                name = f"model.layers.{layer}.{block}.{suffix}"
                if self.ckpt.has(name):
                    return f"model.layers.{layer}.{block}", name
        raise CheckpointError(f"layer {layer} is a MoE layer but has no router "
                              f"(model.layers.{layer}.mlp.gate.weight)", path=self.ckpt.path)

    def _moe_block(self, layer: int) -> str:
        return self._router(layer)[0]

    def name_of(self, role: int, layer: int) -> str:
        """Checkpoint name of a non-expert tensor."""
        if role in _GLOBAL_NAMES and not (role == Role.OUTPUT_NORM and
                                          self.spec.family == "lfm2_moe"):
            return _GLOBAL_NAMES[role]
        if self.spec.family == "longcat_flash":
            return longcat_name(role, layer)
        own = lfm2_name(role, layer) if self.spec.family == "lfm2_moe" else None
        if own is not None:
            return own
        if role in _POST_NORM_NAMES and self.spec.record.norm_kind == NORM_RMS_POST:
            return f"model.layers.{layer}.{_POST_NORM_NAMES[role]}"
        if role in _LLAMA4_DENSE_NAMES and self.spec.family == "llama4_text":
            return f"model.layers.{layer}.{_LLAMA4_DENSE_NAMES[role]}"
        if role in _SANDWICH_NORM_NAMES and self.spec.record.norm_kind == NORM_RMS_SANDWICH:
            return f"model.layers.{layer}.{_SANDWICH_NORM_NAMES[role]}"
        if role in _ROTATED_QK_NORM_NAMES and self.spec.record.qk_norm == QK_NORM_PER_HEAD_ROTATED:
            return f"model.layers.{layer}.{_ROTATED_QK_NORM_NAMES[role]}"
        if role in _LAYER_NAMES:
            return f"model.layers.{layer}.{_LAYER_NAMES[role]}"
        if role == Role.ROUTER:
            return self._router(layer)[1]
        block = self._moe_block(layer)
        if role == Role.ROUTER_BIAS:
            return next((f"{block}.{n}" for n in _ROUTER_BIAS_NAMES
                         if self.ckpt.has(f"{block}.{n}")), f"{block}.{_ROUTER_BIAS_NAMES[0]}")
        if role in _GPT_OSS_BLOCK_NAMES:
            return f"{block}.{_GPT_OSS_BLOCK_NAMES[role]}"
        if role in _ERNIE_BLOCK_NAMES and self.ckpt.has(f"{block}.{_ERNIE_BLOCK_NAMES[role]}"):
            return f"{block}.{_ERNIE_BLOCK_NAMES[role]}"
        if role in _HUNYUAN_BLOCK_NAMES and self.ckpt.has(f"{block}.{_HUNYUAN_BLOCK_NAMES[role]}"):
            return f"{block}.{_HUNYUAN_BLOCK_NAMES[role]}"
        return f"{block}.{_BLOCK_NAMES[role]}"

    # -- loaders -----------------------------------------------------------
    def _load(self, name: str, index: int | None = None, rows: slice | None = None) -> np.ndarray:
        array = self.ckpt.load(name, index)
        if rows is not None:
            array = array[rows]
        if not np.isfinite(array).all():
            raise CheckpointError(f"tensor {name!r} holds NaN or infinity",
                                  path=self.ckpt.file_of(name))
        return array

    def _expect(self, name: str, shape: tuple[int, ...]) -> None:
        if not self.ckpt.has(name):
            raise CheckpointError(f"tensor {name!r} not found (needed for shape {shape})",
                                  path=self.ckpt.path)
        got = tuple(self.ckpt.shape(name))
        if got != tuple(shape):
            raise CheckpointError(f"tensor {name!r} has shape {got}, expected {tuple(shape)}",
                                  path=self.ckpt.file_of(name))
        self.used.add(name)

    def _stored(self, name: str, shape: tuple[int, ...]) -> Loader:
        """The tensor as saved, checked to have this shape."""
        self._expect(name, shape)
        return lambda: self._load(name)

    def _decay(self, name: str, shape: tuple[int, ...]) -> Loader:
        """A state-space decay saved as A_log, stored as A = -exp(A_log) in float32."""
        self._expect(name, shape)
        return lambda: -np.exp(self._load(name).astype(np.float32))

    def _granite_shared(self, entry: TensorEntry) -> Loader | None:
        """Granite's shared MLP: input_linear [2S, H] (gate rows, then up rows)
        and output_linear [H, S]; None when the checkpoint has the usual names."""
        base = f"model.layers.{entry.layer}.shared_mlp"
        fused = f"{base}.input_linear.weight"
        if entry.role not in (Role.SHARED_GATE, Role.SHARED_UP, Role.SHARED_DOWN) or \
                not self.ckpt.has(fused):
            return None
        width, hidden = self.spec.record.shared_intermediate, self.spec.record.hidden_size
        if entry.role == Role.SHARED_DOWN:
            self._expect(f"{base}.output_linear.weight", (hidden, width))
            return lambda: self._load(f"{base}.output_linear.weight")
        self._expect(fused, (2 * width, hidden))
        rows = slice(0, width) if entry.role == Role.SHARED_GATE else slice(width, 2 * width)
        return lambda: self._load(fused, rows=rows)

    def _router_bias(self, entry: TensorEntry) -> Loader:
        """The selection bias: [E], or [1, E] as ERNIE-4.5 keeps it."""
        name = self.name_of(entry.role, entry.layer)
        shape = tuple(self.ckpt.shape(name)) if self.ckpt.has(name) else entry.shape
        self._expect(name, (1, *entry.shape) if len(shape) == 2 else entry.shape)
        return lambda: self._load(name).reshape(entry.shape)

    def _interleaved_rows(self, name: str) -> Loader:
        """q or k rows of each head reordered from RoPE pairs (2i, 2i + 1) to the
        image's pairs (i, i + head_dim/2): even rows first, then odd rows. The
        rotation and every q.k dot product are the same, summed in another order."""
        hd = self.spec.record.head_dim
        order = np.concatenate([np.arange(0, hd, 2), np.arange(1, hd, 2)])

        def load() -> np.ndarray:
            array = self._load(name)
            heads = array.shape[0] // hd
            rows = (np.arange(heads)[:, None] * hd + order[None, :]).reshape(-1)
            return array[rows]
        return load

    def _mla_rope_rows(self, name: str, role: int) -> Loader:
        """MLA with RoPE on pairs (2i, 2i + 1) (DeepSeek-V2, V3's rope_interleave): the
        RoPE rows of each q head (its last rope_dim) and of the RoPE key (after the
        latent) reordered even rows first, then odd: the image's pairs (i, i + d/2)."""
        r = self.spec.record
        d = r.rope_dim
        order = np.concatenate([np.arange(0, d, 2), np.arange(1, d, 2)])

        def load() -> np.ndarray:
            array = self._load(name)
            rows = np.arange(array.shape[0])
            if role == Role.MLA_KV_A:
                rows[r.kv_lora_rank:] = r.kv_lora_rank + order
            else:
                for h in range(r.n_heads):
                    start = h * r.head_dim + r.head_dim - d
                    rows[start:start + d] = start + order
            return array[rows]
        return load

    def _plain(self, entry: TensorEntry) -> Loader:
        if self.spec.family == "longcat_flash":  # the usual loaders, its LoRA scales folded in
            return longcat_scaled(self, entry, self._usual(entry))
        return self._usual(entry)

    def _usual(self, entry: TensorEntry) -> Loader:
        if self.spec.family == "dbrx":
            return dbrx_tensor(self, entry)
        fused = jetmoe_tensor(self, entry) if self.spec.family == "jetmoe" else None
        if self.spec.family == "mimo_v2_flash":
            fused = mimo_tensor(self, entry)
        if self.spec.family == "lfm2_moe":
            fused = lfm2_tensor(self, entry)
        if self.spec.family == "granitemoehybrid":
            fused = mamba2_tensor(self, entry)
        if self.spec.family in ("qwen3_next", "qwen3_5_moe_text"):
            fused = qwen3_next_tensor(self, entry)
        if self.spec.family == "jamba":
            fused = jamba_tensor(self, entry)
        if self.spec.family == "nemotron_h":
            fused = nemotron_h_tensor(self, entry)
        if self.spec.family in ("kimi_linear", "bailing_hybrid"):
            fused = kimi_linear_tensor(self, entry)
        if fused is not None:
            return fused
        granite = self._granite_shared(entry)
        if granite is not None:
            return granite
        if entry.role == Role.ROUTER_BIAS:
            return self._router_bias(entry)
        if entry.role == Role.EXPERT_GATE_UP_BIAS:  # [E, 2I], gate and up interleaved
            name = self.name_of(entry.role, entry.layer)
            self._expect(name, entry.shape)
            return lambda: _deinterleave(self._load(name), axis=1)
        name = self.name_of(entry.role, entry.layer)
        self._expect(name, entry.shape)
        if self.spec.interleaved_rope and self.spec.record.mla:
            if entry.role in (Role.ATTN_Q, Role.MLA_Q_B, Role.MLA_KV_A):
                return self._mla_rope_rows(name, entry.role)
        elif self.spec.interleaved_rope and entry.role in _ROPE_ROLES:
            return self._interleaved_rows(name)
        return lambda: self._load(name)

    def _input_major_experts(self, block: str, interleaved: bool) -> list[tuple[Loader, Loader,
                                                                                   Loader]]:
        """gpt-oss and Llama 4: gate_up_proj [E, H, 2I] (x @ W; gpt-oss's columns 0, 2,
        ... gate, 1, 3, ... up, Llama 4's first I gate, last I up) and down_proj
        [E, I, H], transposed into the image's [out, in]."""
        r = self.spec.record
        e_count, inter, hidden = r.n_experts, r.expert_intermediate, r.hidden_size
        gate_up, down = f"{block}.experts.gate_up_proj", f"{block}.experts.down_proj"
        self._expect(gate_up, (e_count, hidden, 2 * inter))
        self._expect(down, (e_count, inter, hidden))
        gate, up = ((slice(0, None, 2), slice(1, None, 2)) if interleaved else
                    (slice(0, inter), slice(inter, 2 * inter)))
        return [(lambda e=e: np.ascontiguousarray(self._load(gate_up, e)[:, gate].T),
                 lambda e=e: np.ascontiguousarray(self._load(gate_up, e)[:, up].T),
                 lambda e=e: np.ascontiguousarray(self._load(down, e).T)) for e in range(e_count)]

    def _expert_loaders(self, layer: int) -> list[tuple[Loader, Loader, Loader]]:
        if self.spec.family == "dbrx":
            return dbrx_experts(self, layer)
        if self.spec.family == "longcat_flash":
            return longcat_experts(self, layer)
        if self.spec.family == "nemotron_h":
            return nemotron_h_experts(self, layer)
        block = self._moe_block(layer)
        if self.spec.family in ("gpt_oss", "llama4_text"):
            return self._input_major_experts(block, self.spec.family == "gpt_oss")
        r = self.spec.record
        e_count, inter, hidden = r.n_experts, r.expert_intermediate, r.hidden_size
        fused_gate_up, fused_down = f"{block}.experts.gate_up_proj", f"{block}.experts.down_proj"
        if self.ckpt.has(f"{block}.input_linear.weight"):  # Granite's names for the same
            fused_gate_up, fused_down = f"{block}.input_linear.weight", f"{block}.output_linear.weight"
        if self.ckpt.has(fused_gate_up):
            self._expect(fused_gate_up, (e_count, 2 * inter, hidden))
            self._expect(fused_down, (e_count, hidden, inter))
            return [(lambda e=e: self._load(fused_gate_up, e, slice(0, inter)),
                     lambda e=e: self._load(fused_gate_up, e, slice(inter, 2 * inter)),
                     lambda e=e: self._load(fused_down, e)) for e in range(e_count)]
        names = next((n for n in _PER_EXPERT_NAMES
                      if self.ckpt.has(f"{block}.experts.0.{n[0]}.weight")), _PER_EXPERT_NAMES[0])
        out = []
        for e in range(e_count):
            gate, up, down = (f"{block}.experts.{e}.{n}.weight" for n in names)
            self._expect(gate, (inter, hidden))
            self._expect(up, (inter, hidden))
            self._expect(down, (hidden, inter))
            out.append((lambda n=gate: self._load(n), lambda n=up: self._load(n),
                        lambda n=down: self._load(n)))
        return out

    def sources(self) -> list[SourceTensor]:
        """Every image tensor in canonical order, with its loader; shapes checked now."""
        entries, _ = canonical_tensors(self.spec.record, self.spec.ffn_kinds, self.spec.attn_kinds)
        experts = {layer: self._expert_loaders(layer) for layer in self.spec.moe_layers}
        out = []
        for entry in entries:
            if entry.role in (Role.EXPERT_GATE, Role.EXPERT_UP, Role.EXPERT_DOWN):
                loader = experts[entry.layer][entry.expert][entry.role - Role.EXPERT_GATE]
            else:
                loader = self._plain(entry)
            out.append(SourceTensor(entry, loader))
        return out

    # -- checks ------------------------------------------------------------
    def shared_expert_is_zero(self) -> bool:
        """True when every MoE layer's shared expert down projection is all zeros
        (its output is then zero whatever the gate says)."""
        r = self.spec.record
        for layer in self.spec.moe_layers:
            for role, shape in ((Role.SHARED_GATE, (r.shared_intermediate, r.hidden_size)),
                                (Role.SHARED_UP, (r.shared_intermediate, r.hidden_size)),
                                (Role.SHARED_DOWN, (r.hidden_size, r.shared_intermediate)),
                                (Role.SHARED_EXPERT_GATE, (1, r.hidden_size))):
                self._expect(self.name_of(role, layer), shape)
            if np.any(self._load(self.name_of(Role.SHARED_DOWN, layer))):
                return False
        return True

    def _prediction_layer(self, name: str) -> bool:
        """DeepSeek-V3's multi-token-prediction layers (num_nextn_predict_layers of
        them, after the last decoder layer): training-time, not run for generation
        (transformers does not load them either)."""
        extra = self.spec.config.get("num_nextn_predict_layers", 0)
        n = self.spec.record.n_layers
        if self.spec.family == "longcat_flash":
            return name.startswith(PREDICTION_PREFIX)
        return (self.spec.family in ("deepseek_v3", "glm4_moe_lite") and isinstance(extra, int)
                and any(name.startswith(f"model.layers.{n + i}.") for i in range(extra)))

    def check_all_used(self) -> None:
        ignored = {_GLOBAL_NAMES[Role.LM_HEAD]} if self.spec.record.tie_embeddings else set()
        stray = [n for n in self.ckpt.names() if n not in self.used and n not in ignored
                 and not n.endswith(_IGNORED_SUFFIXES) and not self._prediction_layer(n)
                 and 0 not in self.ckpt.shape(n)]  # empty: a width of 0 (AFMoE, 0 shared)
        if stray:
            shown = ", ".join(sorted(stray)[:5]) + (" ..." if len(stray) > 5 else "")
            raise CheckpointError(f"{len(stray)} tensor(s) not used by the {self.spec.family} "
                                  f"mapping (config and weights disagree): {shown}",
                                  path=self.ckpt.path)
