"""The tensors of a layer and of the whole table, in canonical order (docs/format.md
3.1): the Python side of the one description of a layer's tensors, which
sdk/src/layer_tensors.c is for the C core (tests/sdk/test_layer_tensors.py keeps
the two the same); which roles a layer holds and their shapes, from the model
record and the layer's kinds.
"""

from __future__ import annotations

from .image_spec import (
    ACT_RELU2,
    ATTN_CONV,
    ATTN_FULL,
    ATTN_GATED_DELTA,
    ATTN_KDA,
    ATTN_MAMBA1,
    ATTN_MAMBA2,
    ATTN_NONE,
    BIAS_ATTN_GATE,
    BIAS_EXPERTS,
    BIAS_HEAD_GATE,
    BIAS_LM_HEAD,
    BIAS_MOE_OUT,
    BIAS_ROUTER,
    BIAS_SINKS,
    NO_EXPERT,
    NO_LAYER,
    NORM_LAYER,
    NORM_RMS_SANDWICH,
    QK_NORM_L2_ROTATED,
    ROUTER_SIGMOID,
    ROUTER_SOFTMAX_BIASED,
    FfnKind,
    LayerEntry,
    ModelRecord,
    Role,
    TensorEntry,
)


def global_tensors(r: ModelRecord) -> list[TensorEntry]:
    out = [TensorEntry(Role.TOKEN_EMBED, NO_LAYER, NO_EXPERT, (r.vocab_size, r.hidden_size)),
           TensorEntry(Role.OUTPUT_NORM, NO_LAYER, NO_EXPERT, (r.hidden_size,))]
    if not r.tie_embeddings:
        out.append(TensorEntry(Role.LM_HEAD, NO_LAYER, NO_EXPERT, (r.vocab_size, r.hidden_size)))
    if r.norm_kind == NORM_LAYER:
        out.append(TensorEntry(Role.OUTPUT_NORM_BIAS, NO_LAYER, NO_EXPERT, (r.hidden_size,)))
    if r.attn_bias & BIAS_LM_HEAD:
        out.append(TensorEntry(Role.LM_HEAD_BIAS, NO_LAYER, NO_EXPERT, (r.vocab_size,)))
    return out


def _attention_shapes(r: ModelRecord) -> list[tuple[Role, tuple[int, ...], bool]]:
    h, q, k = r.hidden_size, r.n_heads * r.head_dim, r.n_kv_heads * r.head_dim
    experts = r.attention_experts  # 1.11: ATTN_Q and ATTN_O stack the experts'
    q_rows, o_rows = (r.n_experts * k, r.n_experts * h) if experts else (q, h)
    qn, kn = ((q,), (k,)) if r.qk_norm == 1 else ((r.head_dim,), (r.head_dim,))
    mla, lq, lkv = r.mla, r.q_lora_rank, r.kv_lora_rank
    kv_b = r.n_heads * (r.head_dim - (r.rope_dim or r.head_dim) + r.v_head_dim)
    return [
        (Role.ATTN_NORM, (h,), True), (Role.ATTN_Q, (q_rows, h), not mla or lq == 0),
        (Role.MLA_Q_A, (lq, h), mla and lq > 0), (Role.MLA_Q_A_NORM, (lq,), mla and lq > 0),
        (Role.MLA_Q_B, (q, lq), mla and lq > 0),
        (Role.MLA_KV_A, (lkv + r.rope_dim, h), mla), (Role.MLA_KV_A_NORM, (lkv,), mla),
        (Role.MLA_KV_B, (kv_b, lkv), mla),
        (Role.ATTN_K, (k, h), not mla), (Role.ATTN_V, (k, h), not mla),
        (Role.ATTN_GATE, (q, h), bool(r.attn_bias & BIAS_ATTN_GATE)),
        (Role.ATTN_ROUTER, (r.n_experts, h), experts),
        (Role.ATTN_O, (o_rows, r.out_width), True),
        (Role.ATTN_Q_BIAS, (q,), bool(r.attn_bias & 1)),
        (Role.ATTN_K_BIAS, (k,), bool(r.attn_bias & 2)),
        (Role.ATTN_V_BIAS, (k,), bool(r.attn_bias & 4)),
        (Role.ATTN_O_BIAS, (h,), bool(r.attn_bias & 8)),
        (Role.ATTN_Q_NORM, qn, r.qk_norm not in (0, QK_NORM_L2_ROTATED)),
        (Role.ATTN_K_NORM, kn, r.qk_norm not in (0, QK_NORM_L2_ROTATED)),
        (Role.FFN_NORM, (h,), True),
        (Role.ATTN_NORM_BIAS, (h,), r.norm_kind == NORM_LAYER),
        (Role.FFN_NORM_BIAS, (h,), r.norm_kind == NORM_LAYER),
        (Role.ATTN_POST_NORM, (h,), r.norm_kind == NORM_RMS_SANDWICH),
        (Role.FFN_POST_NORM, (h,), r.norm_kind == NORM_RMS_SANDWICH),
        (Role.ATTN_SINKS, (r.n_heads,), bool(r.attn_bias & BIAS_SINKS)),
        (Role.ROPE_FREQ, (r.rope_dim // 2,), bool(r.layer_rope)),
        (Role.ATTN_HEAD_GATE, (r.n_heads, h), bool(r.attn_bias & BIAS_HEAD_GATE)),
    ]


def _ffn_shapes(r: ModelRecord, kind: int) -> list[tuple[Role, tuple[int, ...], bool]]:
    h, d, s = r.hidden_size, r.dense_intermediate, r.shared_intermediate
    gated = r.activation != ACT_RELU2  # 1.14: relu^2 MLPs have no gate matrices
    if kind == FfnKind.NONE:
        return []
    dense = [(Role.DENSE_GATE, (d, h), gated), (Role.DENSE_UP, (d, h), True),
             (Role.DENSE_DOWN, (h, d), True)] if kind != FfnKind.MOE else []
    if kind == FfnKind.DENSE:
        return dense
    shared, e, i, w = s > 0, r.n_experts, r.expert_intermediate, r.router_width
    return dense + [
            (Role.ROUTER_LOGIT_BIAS, (w,), bool(r.attn_bias & BIAS_ROUTER)),
            (Role.ROUTER, (w, h), True), (Role.SHARED_GATE, (s, h), shared and gated),
            (Role.SHARED_UP, (s, h), shared), (Role.SHARED_DOWN, (h, s), shared),
            (Role.SHARED_EXPERT_GATE, (1, h), shared and r.shared_gate == 1),
            (Role.ROUTER_BIAS, (w,),
             r.router_score in (ROUTER_SIGMOID, ROUTER_SOFTMAX_BIASED)),
            (Role.EXPERT_GATE_UP_BIAS, (e, 2 * i), bool(r.attn_bias & BIAS_EXPERTS)),
            (Role.EXPERT_DOWN_BIAS, (e, h), bool(r.attn_bias & BIAS_EXPERTS)),
            (Role.MOE_OUT_BIAS, (h,), bool(r.attn_bias & BIAS_MOE_OUT))]


def _conv_shapes(r: ModelRecord) -> list[tuple[Role, tuple[int, ...], bool]]:
    """A short convolution layer's operator (attn_kind 4, format 1.13)."""
    h = r.hidden_size
    return [
        (Role.ATTN_NORM, (h,), True), (Role.CONV_IN_B, (h, h), True),
        (Role.CONV_IN_C, (h, h), True), (Role.CONV_IN_X, (h, h), True),
        (Role.CONV_KERNEL, (h, r.conv_kernel), True), (Role.CONV_OUT, (h, h), True),
        (Role.FFN_NORM, (h,), True),
        (Role.ATTN_NORM_BIAS, (h,), r.norm_kind == NORM_LAYER),
        (Role.FFN_NORM_BIAS, (h,), r.norm_kind == NORM_LAYER),
        (Role.ATTN_POST_NORM, (h,), r.norm_kind == NORM_RMS_SANDWICH),
        (Role.FFN_POST_NORM, (h,), r.norm_kind == NORM_RMS_SANDWICH),
    ]


def _mamba2_shapes(r: ModelRecord) -> list[tuple[Role, tuple[int, ...], bool]]:
    """A Mamba2 layer's operator (attn_kind 5, format 1.14)."""
    h, inner, channels, heads = r.hidden_size, r.ssm_inner, r.conv_channels, r.ssm_heads
    return [
        (Role.ATTN_NORM, (h,), True), (Role.SSM_IN_Z, (inner, h), True),
        (Role.SSM_IN_XBC, (channels, h), True), (Role.SSM_IN_DT, (heads, h), True),
        (Role.SSM_CONV_KERNEL, (channels, r.conv_kernel), True),
        (Role.SSM_CONV_BIAS, (channels,), True), (Role.SSM_DT_BIAS, (heads,), True),
        (Role.SSM_A, (heads,), True), (Role.SSM_D, (heads,), True),
        (Role.SSM_NORM, (inner,), True), (Role.SSM_OUT, (h, inner), True),
    ] + _conv_shapes(r)[6:]


def _gated_delta_shapes(r: ModelRecord) -> list[tuple[Role, tuple[int, ...], bool]]:
    """A gated delta layer's operator (attn_kind 6, format 1.14)."""
    h, inner, channels, heads = r.hidden_size, r.ssm_inner, r.conv_channels, r.ssm_heads
    return [
        (Role.ATTN_NORM, (h,), True), (Role.SSM_IN_Z, (inner, h), True),
        (Role.SSM_IN_XBC, (channels, h), True), (Role.SSM_IN_DT, (heads, h), True),
        (Role.SSM_IN_BETA, (heads, h), True),
        (Role.SSM_CONV_KERNEL, (channels, r.conv_kernel), True),
        (Role.SSM_DT_BIAS, (heads,), True), (Role.SSM_A, (heads,), True),
        (Role.SSM_NORM, (r.ssm_head_dim,), True), (Role.SSM_OUT, (h, inner), True),
    ] + _conv_shapes(r)[6:]


def _kda_shapes(r: ModelRecord) -> list[tuple[Role, tuple[int, ...], bool]]:
    """A KDA layer's operator (attn_kind 7, format 1.14): its gate projections one
    matrix [I, H] each, or two factors with kda_rank."""
    h, inner, channels, heads = r.hidden_size, r.ssm_inner, r.conv_channels, r.ssm_heads
    low = r.kda_rank > 0
    a_rows = r.kda_rank if low else inner
    return [
        (Role.ATTN_NORM, (h,), True), (Role.SSM_IN_XBC, (channels, h), True),
        (Role.SSM_IN_BETA, (heads, h), True), (Role.KDA_F_A, (a_rows, h), True),
        (Role.KDA_F_B, (inner, r.kda_rank), low), (Role.KDA_G_A, (a_rows, h), True),
        (Role.KDA_G_B, (inner, r.kda_rank), low),
        (Role.SSM_CONV_KERNEL, (channels, r.conv_kernel), True),
        (Role.SSM_DT_BIAS, (inner,), True), (Role.SSM_A, (heads,), True),
        (Role.SSM_NORM, (r.ssm_head_dim,), True), (Role.SSM_OUT, (h, inner), True),
    ] + _conv_shapes(r)[6:]


def _mamba1_shapes(r: ModelRecord) -> list[tuple[Role, tuple[int, ...], bool]]:
    """A Mamba1 layer's operator (attn_kind 8, format 1.14): a head per channel."""
    h, inner, n, rank = r.hidden_size, r.ssm_inner, r.ssm_state, r.ssm_dt_rank
    return [
        (Role.ATTN_NORM, (h,), True), (Role.SSM_IN_Z, (inner, h), True),
        (Role.SSM_IN_XBC, (inner, h), True), (Role.SSM_CONV_KERNEL, (inner, r.conv_kernel), True),
        (Role.SSM_CONV_BIAS, (inner,), True), (Role.MAMBA1_X_PROJ, (rank + 2 * n, inner), True),
        (Role.MAMBA1_DT_NORM, (rank,), True), (Role.MAMBA1_B_NORM, (n,), True),
        (Role.MAMBA1_C_NORM, (n,), True), (Role.MAMBA1_DT_PROJ, (inner, rank), True),
        (Role.SSM_DT_BIAS, (inner,), True), (Role.MAMBA1_A, (inner, n), True),
        (Role.SSM_D, (inner,), True), (Role.SSM_OUT, (h, inner), True),
    ] + _conv_shapes(r)[6:]


_OPERATORS = {ATTN_CONV: _conv_shapes, ATTN_MAMBA2: _mamba2_shapes,
              ATTN_GATED_DELTA: _gated_delta_shapes, ATTN_KDA: _kda_shapes,
              ATTN_MAMBA1: _mamba1_shapes}


def _no_operator_shapes(r: ModelRecord) -> list[tuple[Role, tuple[int, ...], bool]]:
    """A layer without operator (attn_kind 9, format 1.14): its FFN's norms only."""
    return [row for row in _conv_shapes(r) if row[0] in _FFN_NORM_ROLES]


_FFN_NORM_ROLES = (Role.FFN_NORM, Role.FFN_NORM_BIAS, Role.FFN_POST_NORM)
_OPERATORS[ATTN_NONE] = _no_operator_shapes


def _operator_shapes(r: ModelRecord, attn_kind: int, kind: int = FfnKind.DENSE
                     ) -> list[tuple[Role, tuple[int, ...], bool]]:
    """A layer's operator part; without an FFN (ffn_kind 3, 1.14) no FFN norms."""
    rows = _OPERATORS.get(attn_kind, _attention_shapes)(r)
    return [row for row in rows if kind != FfnKind.NONE or row[0] not in _FFN_NORM_ROLES]


def layer_tensors(r: ModelRecord, layer: int, kind: int, attn_kind: int = ATTN_FULL
                  ) -> list[TensorEntry]:
    """The tensors of one layer, in table order (section 3.1)."""
    rows = _operator_shapes(r, attn_kind, kind) + _ffn_shapes(r, kind)
    out = [TensorEntry(role, layer, NO_EXPERT, shape) for role, shape, present in rows if present]
    if kind in (FfnKind.MOE, FfnKind.SHORTCUT):
        h, i = r.hidden_size, r.expert_intermediate
        for e in range(r.n_experts):
            gate = [TensorEntry(Role.EXPERT_GATE, layer, e, (i, h))] if r.activation != ACT_RELU2 \
                else []
            out += gate + [TensorEntry(Role.EXPERT_UP, layer, e, (i, h)),
                           TensorEntry(Role.EXPERT_DOWN, layer, e, (h, i))]
    return out


def layer_tensor_count(r: ModelRecord, kind: int, attn_kind: int = ATTN_FULL) -> int:
    """How many table entries a layer of these kinds has (section 3.1)."""
    rows = _operator_shapes(r, attn_kind, kind) + _ffn_shapes(r, kind)
    per_expert = 2 if r.activation == ACT_RELU2 else 3
    experts = per_expert * r.n_experts if kind in (FfnKind.MOE, FfnKind.SHORTCUT) else 0
    return sum(1 for _, _, present in rows if present) + experts


def canonical_tensors(r: ModelRecord, ffn_kinds: list[int], attn_kinds: list[int] | None = None
                      ) -> tuple[list[TensorEntry], list[LayerEntry]]:
    """The whole tensor table (unplaced) and the layer table, in canonical order
    (attn_kinds: each layer's attention kind, all full when None)."""
    tensors = global_tensors(r)
    layers = []
    attn_kinds = attn_kinds or [0] * len(ffn_kinds)
    for layer, kind in enumerate(ffn_kinds):
        own = layer_tensors(r, layer, kind, attn_kinds[layer])
        layers.append(LayerEntry(int(kind), len(tensors), len(own), int(attn_kinds[layer])))
        tensors += own
    return tensors, layers
