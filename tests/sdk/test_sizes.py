"""State and scratch sizes: the Python tools' (colibri_tools.image.sizes, which
writes model_config.h) equal the C core's for many record shapes and contexts
(docs/core.md, "State and scratch layout")."""
from __future__ import annotations

import itertools
import random
import subprocess
from dataclasses import replace

from colibri_tools.image.image_spec import ModelRecord
from colibri_tools.image.sizes import scratch_size, state_size


def _records():
    rng = random.Random(7)
    for i in range(60):
        heads = rng.choice([1, 2, 3, 4, 6, 8, 16, 32])
        kv = rng.choice([d for d in (1, 2, 4, 8) if heads % d == 0])
        experts = rng.choice([0, 1, 4, 5, 8, 60, 128])
        mla = i % 4 == 3  # Multi-head Latent Attention (format 1.7): its own cache and scratch
        head_dim = 2 * rng.randrange(2, 129)
        mla_fields = dict(mla=1, n_kv_heads=heads, q_lora_rank=rng.choice([0, 24, 1536]),
                          kv_lora_rank=rng.choice([1, 16, 512]),
                          v_head_dim=rng.choice([1, 10, head_dim + 6]),
                          rope_dim=2 * rng.randrange(1, head_dim // 2), lora_eps=1e-6)
        yield ModelRecord(
            vocab_size=97, hidden_size=rng.randrange(1, 5000), n_layers=rng.randrange(1, 60),
            n_heads=heads, n_kv_heads=kv, head_dim=2 * rng.randrange(1, 129),
            max_context=rng.choice([1, 7, 64, 4096]),
            dense_intermediate=rng.choice([0, 17, 11008]),
            expert_intermediate=rng.choice([0, 12, 1408]) if experts else 0, n_experts=experts,
            shared_intermediate=rng.choice([0, 20, 5632]), rms_eps=1e-6, rope_theta=1e4,
            top_k=rng.randrange(1, experts + 1) if experts else 0) if not mla else ModelRecord(
            vocab_size=97, hidden_size=rng.randrange(1, 5000), n_layers=rng.randrange(1, 60),
            n_heads=heads, head_dim=head_dim, max_context=rng.choice([1, 7, 64, 4096]),
            dense_intermediate=17, expert_intermediate=12 if experts else 0, n_experts=experts,
            shared_intermediate=0, rms_eps=1e-6, rope_theta=1e4,
            top_k=rng.randrange(1, experts + 1) if experts else 0, **mla_fields)


def test_python_sizes_equal_the_core(asan_bins):
    """Float32 images and images with a Q8/Q4 matrix (whose scratch adds the
    activation blocks: docs/core.md); with zero-computation experts (a wider router
    row) and shortcut layers (their MoE output held), format 1.12; with short
    convolution layers (no KV cache, two copies of their last inputs), 1.13; with
    Mamba2 layers instead (their SSM state too, and the scratch of their inputs), 1.14;
    with an int8 KV cache (scales and int8 rows), 1.15."""
    checked = mambas = mamba1s = int8s = 0
    for r, pick, batch, quantized in itertools.product(_records(), (1, 3), (1, 7, 256), (0, 1)):
        ctx = max(1, r.max_context // pick)
        zero, shortcut = (r.n_experts % 3, r.n_layers % 2) if r.n_experts else (0, 0)
        conv = (r.head_dim + r.n_layers) % (r.n_layers + 1)  # 0 .. n_layers of them
        taps = 2 + r.hidden_size % 63 if conv else 0
        mamba = conv and r.n_layers % 2 == 0  # the recurrent layers Mamba2 ones
        ssm = (1 + r.hidden_size % 64, 1 + r.head_dim % 70, 1 + r.n_heads * 17 % 130, 1)
        ssm = (ssm[0], ssm[1], ssm[2], 2 if mamba and ssm[0] % 2 == 0 else 1) if mamba else (0,) * 4
        rank = 1 + r.head_dim % 16 if mamba and r.n_layers % 4 == 0 else 0  # Mamba1 layers
        none = (r.n_layers - conv) // 2  # layers without an operator (1.14): no KV cache
        if rank:
            ssm = (64 + r.hidden_size % 64, 1, 1 + r.n_heads % 8, 1)
        kv_int8 = int(not r.mla and (r.hidden_size + pick + batch) % 3 == 0)
        r = replace(r, zero_experts=zero, conv_kernel=taps, ssm_heads=ssm[0], ssm_head_dim=ssm[1],
                    ssm_state=ssm[2], ssm_groups=ssm[3], ssm_dt_rank=rank, kv_int8=kv_int8)
        args = [ctx, r.hidden_size, r.n_layers, r.n_heads, r.n_kv_heads, r.head_dim,
                r.max_context, r.dense_intermediate, r.expert_intermediate, r.n_experts,
                r.shared_intermediate, r.top_k, batch,
                f"{quantized},{zero},{shortcut},{conv},{taps}," + ",".join(map(str, ssm))
                + f",{rank},{none},{kv_int8}"]
        if r.mla:
            args += [r.q_lora_rank, r.kv_lora_rank, r.v_head_dim, r.rope_dim]
        out = subprocess.run([str(asan_bins / "sizes_dump"), *map(str, args)], check=True,
                             capture_output=True, text=True, timeout=30).stdout.split()
        want = [state_size(r, ctx, conv, none),
                scratch_size(r, ctx, batch, bool(quantized), bool(shortcut))]
        assert [int(v) for v in out] == want, r
        checked += 1
        mambas += bool(mamba)
        mamba1s += bool(rank)
        int8s += kv_int8
    assert checked == 720 and mambas > 100 and mamba1s > 20 and int8s > 100


def test_batch_bounds_agree(asan_bins):
    """Batch 0 and COLIBRI_MAX_BATCH + 1 are refused by both (size 0 / OptionError)."""
    import pytest
    from colibri_tools.errors import OptionError
    r = next(_records())
    base = [1, r.hidden_size, r.n_layers, r.n_heads, r.n_kv_heads, r.head_dim, r.max_context,
            r.dense_intermediate, r.expert_intermediate, r.n_experts, r.shared_intermediate,
            r.top_k]
    for batch in (0, 257):
        out = subprocess.run([str(asan_bins / "sizes_dump"), *map(str, base), str(batch)],
                             check=True, capture_output=True, text=True, timeout=30).stdout.split()
        assert int(out[1]) == 0
        with pytest.raises(OptionError):
            scratch_size(r, 1, batch)
