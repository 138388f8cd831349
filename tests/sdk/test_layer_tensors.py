"""One description of a layer's tensors: the C core's (sdk/src/layer_tensors.c,
printed by tests/sdk/layout_dump.c) and the Python writer's
(colibri_tools.image.image_layout.layer_tensors) must list the same roles, experts
and shapes in the same order, for every combination of the record fields
that decide presence and shape."""
from __future__ import annotations

import itertools
import subprocess

import pytest
from colibri_tools.image.image_spec import ModelRecord
from colibri_tools.image.layer_shapes import layer_tensor_count, layer_tensors

VARIANTS = list(itertools.product(
    (0, 1),          # ffn kind: dense, MoE
    (0, 16),         # shared_intermediate
    (0, 1),          # shared_gate
    (0, 5, 15, 239),  # attn_bias bits (239: q, k, v, o, sinks, router, experts)
    (0, 1, 2),       # qk_norm: none, whole projection, per head
    (0, 1),          # norm_kind: RMSNorm, LayerNorm (with bias tensors)
    (0, 4),          # router_score: softmax; softmax chosen with ROUTER_BIAS
))


def _record(shared: int, gate: int, bias: int, qk: int, norm: int, score: int) -> ModelRecord:
    return ModelRecord(vocab_size=97, hidden_size=36, n_layers=2, n_heads=4, n_kv_heads=2,
                       head_dim=10, max_context=64, dense_intermediate=28,
                       expert_intermediate=20, n_experts=3, shared_intermediate=shared,
                       rms_eps=1e-5, rope_theta=1e4, attn_bias=bias, qk_norm=qk,
                       shared_gate=gate if shared else 0, top_k=2, norm_kind=norm,
                       router_score=score)


def _c_layout(dump, kind: int, r: ModelRecord, attn: int = 0
              ) -> tuple[list[tuple[int, int, tuple]], int]:
    args = [kind, r.hidden_size, r.n_heads, r.n_kv_heads, r.head_dim, r.dense_intermediate,
            r.expert_intermediate, r.n_experts, r.shared_intermediate, r.shared_gate,
            r.attn_bias, r.qk_norm, r.norm_kind, r.router_score, r.zero_experts, r.layer_rope,
            r.rope_dim, attn, r.conv_kernel]
    if r.ssm_heads or r.activation:
        args += [r.ssm_heads, r.ssm_head_dim, r.ssm_state, r.ssm_groups, r.kda_rank,
                 r.ssm_dt_rank, r.activation]
    out = subprocess.run([str(dump), *map(str, args)], capture_output=True, text=True,
                         check=True, timeout=30).stdout.splitlines()
    rows = []
    for line in out[:-1]:
        role, expert, n_rows, n_cols = (int(v) for v in line.split())
        rows.append((role, expert, (n_rows, n_cols) if n_cols else (n_rows,)))
    return rows, int(out[-1].split()[1])


@pytest.mark.parametrize("kind,shared,gate,bias,qk,norm,score", VARIANTS)
def test_c_and_python_describe_the_same_layer(asan_bins, kind, shared, gate, bias, qk, norm,
                                              score):
    r = _record(shared, gate, bias, qk, norm, score)
    python = [(int(t.role), -1 if t.expert == 0xFFFF else t.expert, tuple(t.shape))
              for t in layer_tensors(r, 0, kind)]
    c_rows, c_count = _c_layout(asan_bins / "layout_dump", kind, r)
    assert c_rows == python
    assert c_count == len(python) == layer_tensor_count(r, kind)


@pytest.mark.parametrize("kind", [0, 1, 2])  # dense, MoE, shortcut (dense and MoE, format 1.12)
@pytest.mark.parametrize("zero", [0, 3])     # zero-computation experts: the router rows widen
@pytest.mark.parametrize("layer_rope", [0, 1])  # each layer's ROPE_FREQ (rope_dim / 2)
@pytest.mark.parametrize("bias", [0, 64])    # ROUTER_LOGIT_BIAS, E + Z wide too
def test_format_1_12_layers(asan_bins, kind, zero, layer_rope, bias):
    r = _record(0, 0, bias, 0, 0, 4)
    r.zero_experts, r.layer_rope, r.rope_dim = zero, layer_rope, 6
    python = [(int(t.role), -1 if t.expert == 0xFFFF else t.expert, tuple(t.shape))
              for t in layer_tensors(r, 0, kind)]
    c_rows, c_count = _c_layout(asan_bins / "layout_dump", kind, r)
    assert c_rows == python
    assert c_count == len(python) == layer_tensor_count(r, kind)
    assert ((75, -1, (3,)) in python) == bool(layer_rope)
    assert (40, -1, (3 + zero, 36)) in python if kind else 40 not in {row[0] for row in python}


@pytest.mark.parametrize("kind", [0, 1])      # dense, MoE
@pytest.mark.parametrize("norm", [0, 1, 3])   # RMSNorm, LayerNorm (biases), before and after
@pytest.mark.parametrize("attn", [0, 4])      # attention, or (format 1.13) a short convolution
def test_format_1_13_conv_layers(asan_bins, kind, norm, attn):
    r = _record(0, 0, 0, 2, norm, 1)
    r.conv_kernel = 3
    python = [(int(t.role), -1 if t.expert == 0xFFFF else t.expert, tuple(t.shape))
              for t in layer_tensors(r, 0, kind, attn)]
    c_rows, c_count = _c_layout(asan_bins / "layout_dump", kind, r, attn)
    assert c_rows == python
    assert c_count == len(python) == layer_tensor_count(r, kind, attn)
    assert ((79, -1, (36, 3)) in python) == (attn == 4)  # the taps: [H, conv_kernel]
    assert (17 in {row[0] for row in python}) == (attn == 0)  # no attention in a conv layer


@pytest.mark.parametrize("kind", [0, 1])      # dense, MoE
@pytest.mark.parametrize("norm", [0, 1, 3])   # RMSNorm, LayerNorm (biases), before and after
def test_format_1_14_mamba2_layers(asan_bins, kind, norm):
    """A Mamba2 layer (attn_kind 5): its ten tensors in place of the attention's,
    shaped by the extension's sizes (I = 6 * 4, C = I + 2 * 2 * 5)."""
    r = _record(0, 0, 0, 2, norm, 1)
    r.conv_kernel, r.ssm_heads, r.ssm_head_dim, r.ssm_state, r.ssm_groups = 4, 6, 4, 5, 2
    python = [(int(t.role), -1 if t.expert == 0xFFFF else t.expert, tuple(t.shape))
              for t in layer_tensors(r, 0, kind, 5)]
    c_rows, c_count = _c_layout(asan_bins / "layout_dump", kind, r, 5)
    assert c_rows == python
    assert c_count == len(python) == layer_tensor_count(r, kind, 5)
    assert [row for row in python if 81 <= row[0] <= 90] == [
        (81, -1, (24, 36)), (82, -1, (44, 36)), (83, -1, (6, 36)), (84, -1, (44, 4)),
        (85, -1, (44,)), (86, -1, (6,)), (87, -1, (6,)), (88, -1, (6,)), (89, -1, (24,)),
        (90, -1, (36, 24))]
    assert 17 not in {row[0] for row in python}


@pytest.mark.parametrize("kind", [0, 1])      # dense, MoE
def test_format_1_14_gated_delta_layers(asan_bins, kind):
    """A gated delta layer (attn_kind 6): beta's projection, no conv bias or D, the
    norm per value head (ssm_head_dim), with the Mamba2 layer's sizes."""
    r = _record(0, 0, 0, 2, 0, 1)
    r.conv_kernel, r.ssm_heads, r.ssm_head_dim, r.ssm_state, r.ssm_groups = 4, 6, 4, 5, 2
    python = [(int(t.role), -1 if t.expert == 0xFFFF else t.expert, tuple(t.shape))
              for t in layer_tensors(r, 0, kind, 6)]
    c_rows, c_count = _c_layout(asan_bins / "layout_dump", kind, r, 6)
    assert c_rows == python
    assert c_count == len(python) == layer_tensor_count(r, kind, 6)
    assert [row for row in python if 81 <= row[0] <= 91] == [
        (81, -1, (24, 36)), (82, -1, (44, 36)), (83, -1, (6, 36)), (91, -1, (6, 36)),
        (84, -1, (44, 4)), (86, -1, (6,)), (87, -1, (6,)), (89, -1, (4,)), (90, -1, (36, 24))]


@pytest.mark.parametrize("rank", [0, 3])  # one matrix per gate, or two factors
def test_format_1_14_kda_layers(asan_bins, rank):
    """A KDA layer (attn_kind 7): no z, dt, conv bias or D; the gates' projections
    one matrix [I, H] each, or two factors [rank, H] and [I, rank]; dt_bias per
    channel."""
    r = _record(0, 0, 0, 2, 0, 1)
    r.conv_kernel, r.ssm_heads, r.ssm_head_dim, r.ssm_state, r.ssm_groups = 4, 3, 4, 4, 3
    r.kda_rank = rank
    python = [(int(t.role), -1 if t.expert == 0xFFFF else t.expert, tuple(t.shape))
              for t in layer_tensors(r, 0, 1, 7)]
    c_rows, c_count = _c_layout(asan_bins / "layout_dump", 1, r, 7)
    assert c_rows == python
    assert c_count == len(python) == layer_tensor_count(r, 1, 7)
    gate = [(3, 36), (12, 3)] if rank else [(12, 36)]
    assert [row for row in python if 81 <= row[0] <= 95] == [
        (82, -1, (36, 36)), (91, -1, (3, 36)), *((92 + i, -1, g) for i, g in enumerate(gate)),
        *((94 + i, -1, g) for i, g in enumerate(gate)), (84, -1, (36, 4)), (86, -1, (12,)),
        (87, -1, (3,)), (89, -1, (4,)), (90, -1, (36, 12))]


def test_format_1_14_mamba1_layers(asan_bins):
    """A Mamba1 layer (attn_kind 8): a head per channel, its convolution over x
    alone, x_proj [R + 2N, I], the norms of dt, B and C, dt_proj [I, R], A [I, N]."""
    r = _record(0, 0, 0, 2, 0, 1)
    r.conv_kernel, r.ssm_heads, r.ssm_head_dim, r.ssm_state, r.ssm_groups = 4, 20, 1, 3, 1
    r.ssm_dt_rank = 2
    python = [(int(t.role), -1 if t.expert == 0xFFFF else t.expert, tuple(t.shape))
              for t in layer_tensors(r, 0, 1, 8)]
    c_rows, c_count = _c_layout(asan_bins / "layout_dump", 1, r, 8)
    assert c_rows == python
    assert c_count == len(python) == layer_tensor_count(r, 1, 8)
    assert [row for row in python if 81 <= row[0] <= 102] == [
        (81, -1, (20, 36)), (82, -1, (20, 36)), (84, -1, (20, 4)), (85, -1, (20,)),
        (97, -1, (8, 20)), (98, -1, (2,)), (99, -1, (3,)), (100, -1, (3,)), (101, -1, (20, 2)),
        (86, -1, (20,)), (102, -1, (20, 3)), (88, -1, (20,)), (90, -1, (36, 20))]
