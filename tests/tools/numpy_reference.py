"""An independent float64 numpy forward pass over a model image.

It reads only the image (record + tensors) and follows the semantics that
docs/format.md gives each field, so comparing its logits with the Hugging Face
model's checks that the converter mapped every tensor and flag correctly
(gate vs up, q/k norm kind, routing normalisation, shared expert gate, biases,
the format 1.1 scales and top-k-then-softmax routing, the format 1.2 LayerNorm,
sparsemixer routing and LM-head bias, the format 1.4 biased selection and the
floor of the weights' sum, the format 1.5 sigmoid router with its bias and
groups, partial RoPE and YaRN, the format 1.6 sinks, sliding windows, router and
expert biases and clamped SwiGLU, the format 1.11 q/k/v clamp, output gate,
norms before and after each sublayer, chunked attention, the unweighted q/k
norm, the attention temperature, the router weighting the experts' input and
the attention experts; the format 1.12 zero-computation experts, shortcut
layers and each layer's own RoPE frequencies).
RoPE pairs dimension i with i + rope_dim/2, as transformers does.
"""

from __future__ import annotations

import numpy as np
from colibri_tools.image.image_format import NO_EXPERT, NO_LAYER, FfnKind, ModelImage, Role


def _rms(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    d = x - x.mean(axis=-1, keepdims=True)
    return d / np.sqrt(np.mean(d * d, axis=-1, keepdims=True) + eps) * weight + bias


def _norm(w: _Weights, x: np.ndarray, role: Role, bias: Role, layer: int = NO_LAYER) -> np.ndarray:
    """norm_kind 0: RMSNorm; 1 (format 1.2): LayerNorm with the bias tensor."""
    r = w.image.record
    if r.norm_kind == 1:
        return _layer_norm(x, w.get(role, layer), w.get(bias, layer), r.rms_eps)
    return _rms(x, w.get(role, layer), r.rms_eps)


def _sparsemixer(logits: np.ndarray, eps: float) -> tuple[list[int], list[float]]:
    """PhiMoE's top-2 at inference: the top logit, then the top of the rest; each
    weighted by a softmax over the logits s with (top - s) / max(|s|, top) <= 2 eps."""
    chosen, weights, skip = [], [], None
    for _ in range(2):
        rest = [e for e in range(len(logits)) if e != skip]
        pick = max(rest, key=lambda e: (logits[e], -e))
        top = logits[pick]
        kept = [e for e in rest
                if (top - logits[e]) / max(abs(logits[e]), top) <= 2 * eps]
        weights.append(1.0 / np.exp(logits[kept] - top).sum())
        chosen.append(pick)
        skip = pick
    return chosen, weights


def _silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


class _Weights:
    def __init__(self, image: ModelImage) -> None:
        self.image = image

    def get(self, role: Role, layer: int = NO_LAYER, expert: int = NO_EXPERT) -> np.ndarray:
        return self.image.tensor_array(self.image.find(role, layer, expert)).astype(np.float64)

    def has(self, role: Role, layer: int) -> bool:
        return any(t.key == (role, layer, NO_EXPERT) for t in self.image.tensors)


def _inv_freq(r, table: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """Inverse frequencies of the rope_dim/2 pairs and the cos/sin factor (1.2 YaRN);
    a layer's own table (format 1.12) when given."""
    if table is not None:
        return table, 1.0
    dim = r.rope_dim or r.head_dim
    inv = r.rope_theta ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)
    if r.rope_kind != 1:
        return inv, 1.0
    ramp = np.clip((np.arange(dim // 2) - r.rope_ramp_low) / r.rope_ramp_width, 0, 1)
    return inv / r.rope_factor * ramp + inv * (1 - ramp), r.rope_attn_factor


def _rope(x: np.ndarray, positions: np.ndarray, r, table: np.ndarray | None = None
          ) -> np.ndarray:
    """x: [n, heads, head_dim]; RoPE on the first rope_dim dimensions of each head."""
    inv, factor = _inv_freq(r, table)
    half = inv.shape[0]
    angles = positions[:, None] * inv[None, :]
    cos = factor * np.cos(np.concatenate([angles, angles], -1))[:, None, :]
    sin = factor * np.sin(np.concatenate([angles, angles], -1))[:, None, :]
    turned, rest = x[..., :2 * half], x[..., 2 * half:]
    rotated = np.concatenate([-turned[..., half:], turned[..., :half]], -1)
    return np.concatenate([turned * cos + rotated * sin, rest], -1)


def _project(w: _Weights, h: np.ndarray, layer: int, role: Role, bias: Role) -> np.ndarray:
    out = h @ w.get(role, layer).T
    return out + w.get(bias, layer) if w.has(bias, layer) else out


def _mla_attention(w: _Weights, h: np.ndarray, layer: int) -> np.ndarray:
    """Multi-head Latent Attention (format 1.6) in the expanded form: every head's
    key [W_uk c, RoPE key] and value W_uv c written out, as transformers does."""
    r = w.image.record
    n, hd, d, lkv = h.shape[0], r.head_dim, r.rope_dim, r.kv_lora_rank
    nope = hd - d
    if r.q_lora_rank:
        qa = _rms(h @ w.get(Role.MLA_Q_A, layer).T, w.get(Role.MLA_Q_A_NORM, layer), r.lora_eps)
        q = qa @ w.get(Role.MLA_Q_B, layer).T
    else:
        q = h @ w.get(Role.ATTN_Q, layer).T
    q = q.reshape(n, r.n_heads, hd)
    kv_a = h @ w.get(Role.MLA_KV_A, layer).T
    latent = _rms(kv_a[:, :lkv], w.get(Role.MLA_KV_A_NORM, layer), r.lora_eps)
    positions = np.arange(n, dtype=np.float64)
    turned = w.image.layers[layer].attn_kind != 2  # format 1.14: Kimi-Linear's MLA has no RoPE
    q = np.concatenate([q[..., :nope], _rope(q[..., nope:], positions, r) if turned
                        else q[..., nope:]], -1)
    k_pe = _rope(kv_a[:, None, lkv:], positions, r) if turned else kv_a[:, None, lkv:]
    kv = (latent @ w.get(Role.MLA_KV_B, layer).T).reshape(n, r.n_heads, nope + r.v_head_dim)
    k = np.concatenate([kv[..., :nope], np.broadcast_to(k_pe, (n, r.n_heads, d))], -1)
    mask = np.triu(np.full((n, n), -np.inf), 1)
    scale = r.attention_scale if r.has_scales else 1.0 / np.sqrt(hd)
    out = np.empty((n, r.n_heads, r.v_head_dim))
    for head in range(r.n_heads):
        scores = q[:, head] @ k[:, head].T * scale + mask
        out[:, head] = _softmax(scores) @ kv[:, head, nope:]
    if r.attn_bias & 0x800:  # format 1.14: each head's output times sigmoid(ATTN_HEAD_GATE h)
        gate = 1.0 / (1.0 + np.exp(-(h @ w.get(Role.ATTN_HEAD_GATE, layer).T)))
        out = out * gate[:, :, None]
    return _project(w, out.reshape(n, -1), layer, Role.ATTN_O, Role.ATTN_O_BIAS)


def _expert_attention(w: _Weights, h: np.ndarray, layer: int) -> np.ndarray:
    """Attention experts (format 1.11, JetMoE), token by token: the top_k router
    logits, a softmax over them; each chosen expert's query heads (its rows of
    ATTN_Q, RoPE'd) over the shared keys and values, head j on KV head j, its rows
    of ATTN_O, times its gate; summed, plus ATTN_O_BIAS."""
    r = w.image.record
    n, hd, kv = h.shape[0], r.head_dim, r.n_kv_heads
    positions = np.arange(n, dtype=np.float64)
    logits = h @ w.get(Role.ATTN_ROUTER, layer).T
    q_all = w.get(Role.ATTN_Q, layer).reshape(r.n_experts, kv * hd, -1)
    o_all = w.get(Role.ATTN_O, layer).reshape(r.n_experts, r.hidden_size, kv * hd)
    k = _rope(_project(w, h, layer, Role.ATTN_K, Role.ATTN_K_BIAS).reshape(n, kv, hd), positions, r)
    v = _project(w, h, layer, Role.ATTN_V, Role.ATTN_V_BIAS).reshape(n, kv, hd)
    scale = r.attention_scale if r.has_scales else 1.0 / np.sqrt(hd)
    out = np.zeros_like(h)
    for t in range(n):
        chosen = np.argsort(-logits[t], kind="stable")[:r.top_k]
        for e, gate in zip(chosen, _softmax(logits[t, chosen])):
            q = _rope((q_all[e] @ h[t]).reshape(1, kv, hd), positions[t:t + 1], r)[0]
            heads = [_softmax(k[:t + 1, j] @ q[j] * scale) @ v[:t + 1, j] for j in range(kv)]
            out[t] += gate * (o_all[e] @ np.concatenate(heads))
    return out + w.get(Role.ATTN_O_BIAS, layer) if w.has(Role.ATTN_O_BIAS, layer) else out


def _attention(w: _Weights, h: np.ndarray, layer: int) -> np.ndarray:
    r = w.image.record
    if r.mla:
        return _mla_attention(w, h, layer)
    if r.attention_experts:
        return _expert_attention(w, h, layer)
    n, hd = h.shape[0], r.head_dim
    q = _project(w, h, layer, Role.ATTN_Q, Role.ATTN_Q_BIAS)
    k = _project(w, h, layer, Role.ATTN_K, Role.ATTN_K_BIAS)
    v = _project(w, h, layer, Role.ATTN_V, Role.ATTN_V_BIAS)
    if r.qkv_clip:  # format 1.11: q, k and v clamped (DBRX)
        q, k, v = (np.clip(a, -r.qkv_clip, r.qkv_clip) for a in (q, k, v))
    if r.qk_norm == 1:
        q = _rms(q, w.get(Role.ATTN_Q_NORM, layer), r.rms_eps)
        k = _rms(k, w.get(Role.ATTN_K_NORM, layer), r.rms_eps)
    q, k, v = q.reshape(n, r.n_heads, hd), k.reshape(n, r.n_kv_heads, hd), v.reshape(n, r.n_kv_heads, hd)
    if r.qk_norm == 2:
        q = _rms(q, w.get(Role.ATTN_Q_NORM, layer), r.rms_eps)
        k = _rms(k, w.get(Role.ATTN_K_NORM, layer), r.rms_eps)
    positions = np.arange(n, dtype=np.float64)
    table = w.get(Role.ROPE_FREQ, layer) if r.layer_rope else None  # format 1.12
    if w.image.layers[layer].attn_kind != 2:  # format 1.10: 2 is full attention without RoPE
        q, k = _rope(q, positions, r, table), _rope(k, positions, r, table)
    if r.qk_norm == 3:  # format 1.10: per head, after RoPE (Hunyuan)
        q = _rms(q, w.get(Role.ATTN_Q_NORM, layer), r.rms_eps)
        k = _rms(k, w.get(Role.ATTN_K_NORM, layer), r.rms_eps)
    kind = w.image.layers[layer].attn_kind
    if r.qk_norm == 4 and kind != 2:  # format 1.11: no weights, after RoPE (Llama 4)
        q, k = _rms(q, 1.0, r.rms_eps), _rms(k, 1.0, r.rms_eps)
    if r.attn_temp_floor and kind == 2:  # format 1.11: Llama 4's attention temperature
        q = q * (np.log1p(np.floor((positions + 1) / r.attn_temp_floor)) * r.attn_temp_scale
                 + 1.0)[:, None, None]
    group = r.n_heads // r.n_kv_heads
    mask = np.triu(np.full((n, n), -np.inf), 1)
    if kind == 1:  # format 1.6: the last sliding_window positions
        mask = mask + np.tril(np.full((n, n), -np.inf), -r.sliding_window)
    if kind == 3:  # format 1.11: within each chunk of sliding_window positions
        chunk = np.arange(n) // r.sliding_window
        mask = mask + np.where(chunk[:, None] == chunk[None, :], 0.0, -np.inf)
    sinks = w.get(Role.ATTN_SINKS, layer) if r.attn_bias & 0x20 else None
    out = np.empty((n, r.n_heads, hd))
    scale = r.attention_scale if r.has_scales else 1.0 / np.sqrt(hd)
    for head in range(r.n_heads):
        scores = q[:, head] @ k[:, head // group].T * scale + mask
        if sinks is not None:  # one more logit per row whose share is dropped
            full = _softmax(np.concatenate([scores, np.full((n, 1), sinks[head])], axis=1))
            out[:, head] = full[:, :-1] @ v[:, head // group]
            continue
        out[:, head] = _softmax(scores) @ v[:, head // group]
    out = out.reshape(n, -1)
    if r.attn_bias & 0x100:  # format 1.11: times sigmoid(ATTN_GATE h), element by element
        out = out / (1.0 + np.exp(-(h @ w.get(Role.ATTN_GATE, layer).T)))
    return _project(w, out, layer, Role.ATTN_O, Role.ATTN_O_BIAS)


def _short_conv(w: _Weights, h: np.ndarray, layer: int) -> np.ndarray:
    """A short convolution layer (attn_kind 4, format 1.13): B, C and X of the normed
    input, each channel of B * X convolved causally over conv_kernel positions
    (zeros before the first), times C, through CONV_OUT."""
    b, c, x = (h @ w.get(role, layer).T for role in (Role.CONV_IN_B, Role.CONV_IN_C,
                                                       Role.CONV_IN_X))
    taps = w.get(Role.CONV_KERNEL, layer)  # [H, L], oldest position first
    bx = np.concatenate([np.zeros((taps.shape[1] - 1, h.shape[1]), np.float32), b * x])
    conv = np.stack([(bx[t:t + taps.shape[1]] * taps.T).sum(axis=0) for t in range(h.shape[0])])
    return (c * conv) @ w.get(Role.CONV_OUT, layer).T


def _mamba2(w: _Weights, h: np.ndarray, layer: int) -> np.ndarray:
    """A Mamba2 layer (attn_kind 5, format 1.14), its recurrence written out token
    by token: z, x/B/C and dt of the normed input; x/B/C convolved causally plus
    bias, then SiLU; per head dt = softplus(dt + dt_bias), S = S exp(dt A) + dt B x,
    y = S C + D x; y silu(z) normed per group; SSM_OUT."""
    r = w.image.record
    heads, dim, size, groups = r.ssm_heads, r.ssm_head_dim, r.ssm_state, r.ssm_groups
    inner = heads * dim
    z, xbc, dt = (h @ w.get(role, layer).T for role in (Role.SSM_IN_Z, Role.SSM_IN_XBC,
                                                        Role.SSM_IN_DT))
    taps = w.get(Role.SSM_CONV_KERNEL, layer)  # [C, L], oldest position first
    padded = np.concatenate([np.zeros((taps.shape[1] - 1, xbc.shape[1]), np.float32), xbc])
    conv = np.stack([(padded[t:t + taps.shape[1]] * taps.T).sum(axis=0)
                     for t in range(h.shape[0])]) + w.get(Role.SSM_CONV_BIAS, layer)
    conv = _silu(conv)
    x, b, c = conv[:, :inner], conv[:, inner:inner + groups * size], conv[:, inner + groups * size:]
    dt = np.maximum(np.logaddexp(0.0, dt + w.get(Role.SSM_DT_BIAS, layer)), r.ssm_dt_min)
    a, d = w.get(Role.SSM_A, layer), w.get(Role.SSM_D, layer)
    state = np.zeros((heads, dim, size), np.float64)
    y = np.zeros((h.shape[0], heads, dim), np.float64)
    for t in range(h.shape[0]):
        for head in range(heads):
            g = head // (heads // groups)
            bg, cg = b[t, g * size:(g + 1) * size], c[t, g * size:(g + 1) * size]
            xh = x[t, head * dim:(head + 1) * dim]
            state[head] = state[head] * np.exp(dt[t, head] * a[head]) + \
                dt[t, head] * np.outer(xh, bg)
            y[t, head] = state[head] @ cg + d[head] * xh
    gated = (y.reshape(h.shape[0], inner) * _silu(z)).reshape(h.shape[0], groups, -1)
    normed = gated / np.sqrt((gated ** 2).mean(axis=-1, keepdims=True) + r.rms_eps)
    normed = normed.reshape(h.shape[0], inner) * w.get(Role.SSM_NORM, layer)
    return normed.astype(np.float32) @ w.get(Role.SSM_OUT, layer).T


def _gated_delta(w: _Weights, h: np.ndarray, layer: int) -> np.ndarray:
    """A gated delta layer (attn_kind 6, format 1.14), token by token: z, v/k/q, a and
    b of the normed input; v/k/q convolved causally, then SiLU; k and q L2-normed per
    key head (+ 1e-6 under the root), q / sqrt(dk); per value head g = A softplus(a +
    dt_bias), beta = sigmoid(b), S = S exp(g), S += k ((v - S^T k) beta), y = S^T q;
    y RMS-normed per head times silu(z); SSM_OUT."""
    r = w.image.record
    heads, dv, dk, key_heads = r.ssm_heads, r.ssm_head_dim, r.ssm_state, r.ssm_groups
    inner = heads * dv
    z, xbc, a, b = (h @ w.get(role, layer).T for role in (
        Role.SSM_IN_Z, Role.SSM_IN_XBC, Role.SSM_IN_DT, Role.SSM_IN_BETA))
    taps = w.get(Role.SSM_CONV_KERNEL, layer)
    padded = np.concatenate([np.zeros((taps.shape[1] - 1, xbc.shape[1]), np.float32), xbc])
    conv = _silu(np.stack([(padded[t:t + taps.shape[1]] * taps.T).sum(axis=0)
                           for t in range(h.shape[0])])).astype(np.float64)
    v = conv[:, :inner].reshape(-1, heads, dv)
    k = conv[:, inner:inner + key_heads * dk].reshape(-1, key_heads, dk)
    q = conv[:, inner + key_heads * dk:].reshape(-1, key_heads, dk)
    k = k / np.sqrt((k ** 2).sum(-1, keepdims=True) + 1e-6)
    q = q / np.sqrt((q ** 2).sum(-1, keepdims=True) + 1e-6) / np.sqrt(dk)
    g = w.get(Role.SSM_A, layer) * np.logaddexp(0.0, a + w.get(Role.SSM_DT_BIAS, layer))
    beta = 1.0 / (1.0 + np.exp(-b))
    state = np.zeros((heads, dk, dv))
    y = np.zeros((h.shape[0], heads, dv))
    for t in range(h.shape[0]):
        for head in range(heads):
            kh, qh = k[t, head // (heads // key_heads)], q[t, head // (heads // key_heads)]
            state[head] *= np.exp(g[t, head])
            delta = (v[t, head] - kh @ state[head]) * beta[t, head]
            state[head] += np.outer(kh, delta)
            y[t, head] = qh @ state[head]
    normed = y / np.sqrt((y ** 2).mean(-1, keepdims=True) + r.rms_eps) * w.get(Role.SSM_NORM, layer)
    gated = normed.reshape(h.shape[0], inner) * _silu(z)
    return gated.astype(np.float32) @ w.get(Role.SSM_OUT, layer).T


def _kda(w: _Weights, h: np.ndarray, layer: int) -> np.ndarray:
    """A KDA layer (attn_kind 7, format 1.14): the gated delta rule with a decay per key
    channel, g = A softplus(F h + dt_bias) (F = F_B F_A with kda_rank; kda_bound * sigmoid(-A
    x) when bounded), and y RMS-normed per head times sigmoid(G h)."""
    r = w.image.record
    heads, dim = r.ssm_heads, r.ssm_head_dim
    inner = heads * dim

    def gate(a: Role, b: Role) -> np.ndarray:
        out = h @ w.get(a, layer).T
        return out @ w.get(b, layer).T if r.kda_rank else out

    xbc = h @ w.get(Role.SSM_IN_XBC, layer).T
    taps = w.get(Role.SSM_CONV_KERNEL, layer)
    padded = np.concatenate([np.zeros((taps.shape[1] - 1, xbc.shape[1]), np.float32), xbc])
    conv = _silu(np.stack([(padded[t:t + taps.shape[1]] * taps.T).sum(axis=0)
                           for t in range(h.shape[0])])).astype(np.float64)
    v, k, q = (conv[:, i * inner:(i + 1) * inner].reshape(-1, heads, dim) for i in range(3))
    k = k / np.sqrt((k ** 2).sum(-1, keepdims=True) + 1e-6)
    q = q / np.sqrt((q ** 2).sum(-1, keepdims=True) + 1e-6) / np.sqrt(dim)
    x = gate(Role.KDA_F_A, Role.KDA_F_B) + w.get(Role.SSM_DT_BIAS, layer)
    a = np.repeat(w.get(Role.SSM_A, layer), dim)
    g = r.kda_bound / (1.0 + np.exp(a * x)) if r.kda_bound else a * np.logaddexp(0.0, x)
    g = g.reshape(-1, heads, dim)
    beta = 1.0 / (1.0 + np.exp(-(h @ w.get(Role.SSM_IN_BETA, layer).T)))
    state = np.zeros((heads, dim, dim))
    y = np.zeros((h.shape[0], heads, dim))
    for t in range(h.shape[0]):
        for head in range(heads):
            state[head] *= np.exp(g[t, head])[:, None]
            delta = (v[t, head] - k[t, head] @ state[head]) * beta[t, head]
            state[head] += np.outer(k[t, head], delta)
            y[t, head] = q[t, head] @ state[head]
    normed = y / np.sqrt((y ** 2).mean(-1, keepdims=True) + r.rms_eps) * w.get(Role.SSM_NORM, layer)
    out = normed.reshape(h.shape[0], inner) / (1.0 + np.exp(-gate(Role.KDA_G_A, Role.KDA_G_B)))
    return out.astype(np.float32) @ w.get(Role.SSM_OUT, layer).T


def _mamba1(w: _Weights, h: np.ndarray, layer: int) -> np.ndarray:
    """A Mamba1 layer (attn_kind 8, format 1.14), token by token: x convolved causally
    plus bias, then SiLU; dt, B and C of x, each RMS-normed; dt = softplus(DT_PROJ dt +
    dt_bias) per channel; S = S exp(dt A) + dt B x, y = S C + D x per channel; y silu(z)."""
    r = w.image.record
    inner, n, rank = r.ssm_heads, r.ssm_state, r.ssm_dt_rank
    x, z = (h @ w.get(role, layer).T for role in (Role.SSM_IN_XBC, Role.SSM_IN_Z))
    taps = w.get(Role.SSM_CONV_KERNEL, layer)
    padded = np.concatenate([np.zeros((taps.shape[1] - 1, inner), np.float32), x])
    x = _silu(np.stack([(padded[t:t + taps.shape[1]] * taps.T).sum(axis=0)
                        for t in range(h.shape[0])]) + w.get(Role.SSM_CONV_BIAS, layer))
    proj = x @ w.get(Role.MAMBA1_X_PROJ, layer).T
    dt = _rms(proj[:, :rank], w.get(Role.MAMBA1_DT_NORM, layer), r.rms_eps)
    b = _rms(proj[:, rank:rank + n], w.get(Role.MAMBA1_B_NORM, layer), r.rms_eps)
    c = _rms(proj[:, rank + n:], w.get(Role.MAMBA1_C_NORM, layer), r.rms_eps)
    dt = np.logaddexp(0.0, dt @ w.get(Role.MAMBA1_DT_PROJ, layer).T + w.get(Role.SSM_DT_BIAS, layer))
    a, d = w.get(Role.MAMBA1_A, layer), w.get(Role.SSM_D, layer)
    state = np.zeros((inner, n))
    y = np.zeros((h.shape[0], inner))
    for t in range(h.shape[0]):
        state = state * np.exp(dt[t][:, None] * a) + (dt[t][:, None] * b[t][None, :]) * x[t][:, None]
        y[t] = state @ c[t] + d * x[t]
    return (y * _silu(z)).astype(np.float32) @ w.get(Role.SSM_OUT, layer).T


def _swiglu(h: np.ndarray, gate: np.ndarray | None, up: np.ndarray, down: np.ndarray,
            r=None, bias: tuple | None = None) -> np.ndarray:
    if gate is None:  # format 1.14: relu(up h)^2 without a gate (Nemotron-H)
        return np.maximum(h @ up.T, 0.0) ** 2 @ down.T
    g, u = h @ gate.T, h @ up.T
    if bias is not None:
        g, u = g + bias[0], u + bias[1]
    if r is not None and r.activation == 1:  # format 1.6: gpt-oss's clamped SwiGLU
        g = np.minimum(g, r.swiglu_limit)
        u = np.clip(u, -r.swiglu_limit, r.swiglu_limit)
        out = ((u + 1.0) * g / (1.0 + np.exp(-r.swiglu_alpha * g))) @ down.T
    else:
        out = (_silu(g) * u) @ down.T
    return out + bias[2] if bias is not None else out


def _gated(w: _Weights, role: Role, layer: int, expert: int = NO_EXPERT) -> np.ndarray | None:
    """An MLP matrix; None for a gate without gates (activation 2, format 1.14)."""
    gates = (Role.EXPERT_GATE, Role.SHARED_GATE, Role.DENSE_GATE)
    if role in gates and w.image.record.activation == 2:
        return None
    return w.get(role, layer, expert)


def _candidates(r, scores: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Selection keys with the experts outside the topk_group best groups at -inf
    (a group ranked by its best score, or by the sum of its two best keys when
    the router is sigmoid)."""
    if r.n_group == 1:
        return keys
    groups = keys.reshape(r.n_group, -1)
    if r.router_score == 1:
        rank = np.sort(groups, axis=-1)[:, -2:].sum(-1)
    else:
        rank = scores.reshape(r.n_group, -1).max(-1)
    kept = np.argsort(-rank, kind="stable")[:r.topk_group]
    mask = np.full(r.n_group, -np.inf)
    mask[kept] = 0.0
    return (groups + mask[:, None]).reshape(-1)


def _moe(w: _Weights, h: np.ndarray, layer: int) -> np.ndarray:
    r = w.image.record
    logits = h @ w.get(Role.ROUTER, layer).T
    if r.attn_bias & 0x40:  # format 1.6: the router's logit bias
        logits = logits + w.get(Role.ROUTER_LOGIT_BIAS, layer)
    probs = 1.0 / (1.0 + np.exp(-logits)) if r.router_score == 1 else _softmax(logits)
    bias = w.get(Role.ROUTER_BIAS, layer) if r.router_score == 1 else 0.0
    out = np.zeros_like(h)
    for t in range(h.shape[0]):
        keys = _candidates(r, probs[t], probs[t] + bias)
        chosen = np.argsort(-keys, kind="stable")[:r.top_k]
        weights = probs[t, chosen]
        if r.router_score == 2:  # format 1.1: top-k of the logits, softmax over the k
            weights = _softmax(logits[t, chosen])
        if r.router_score == 3:  # format 1.2: sparsemixer
            chosen, weights = _sparsemixer(logits[t], r.router_jitter)
            weights = np.asarray(weights)
        if r.router_score == 5:  # format 1.11: top-k logits, sigmoid weights on the input
            chosen = np.argsort(-logits[t], kind="stable")[:r.top_k]
            weights = 1.0 / (1.0 + np.exp(-logits[t, chosen]))
        if r.router_score == 4:  # format 1.4: chosen on softmax + ROUTER_BIAS
            keys = probs[t] + w.get(Role.ROUTER_BIAS, layer)
            chosen = np.argsort(-keys, kind="stable")[:r.top_k]
            weights = probs[t, chosen]
        if r.router_norm_topk:  # + router_sum_eps: LFM2's 1e-6 (format 1.13)
            weights = weights / max(weights.sum() + r.router_sum_eps, r.router_norm_min)
        for e, weight in zip(chosen, weights * r.routed_scaling):
            if e >= r.n_experts:  # format 1.12: a zero-computation expert, the identity
                out[t] += weight * h[t]
                continue
            experts = [_gated(w, role, layer, int(e)) for role in
                       (Role.EXPERT_GATE, Role.EXPERT_UP, Role.EXPERT_DOWN)]
            expert_bias = None
            if r.attn_bias & 0x80:  # format 1.6: the experts' biases
                gate_up = w.get(Role.EXPERT_GATE_UP_BIAS, layer)[int(e)]
                i = r.expert_intermediate
                expert_bias = (gate_up[:i], gate_up[i:],
                               w.get(Role.EXPERT_DOWN_BIAS, layer)[int(e)])
            if r.router_score == 5:  # the expert runs on the weighted input
                out[t] += _swiglu(weight * h[t:t + 1], *experts, r, expert_bias)[0]
                continue
            out[t] += weight * _swiglu(h[t:t + 1], *experts, r, expert_bias)[0]
    if r.attn_bias & 0x400:  # format 1.11: a bias after the routed experts' sum (JetMoE)
        out = out + w.get(Role.MOE_OUT_BIAS, layer)
    if r.shared_intermediate:
        shared = _swiglu(h, *(_gated(w, role, layer) for role in
                              (Role.SHARED_GATE, Role.SHARED_UP, Role.SHARED_DOWN)), r)
        if r.shared_gate:
            shared = shared / (1.0 + np.exp(-(h @ w.get(Role.SHARED_EXPERT_GATE, layer).T)))
        out += shared
    return out


def forward(image: ModelImage, ids: list[int]) -> np.ndarray:
    """Logits [len(ids), vocab] for ids at positions 0 .. len(ids)-1."""
    r, w = image.record, _Weights(image)
    embed, residual, divisor = ((r.embedding_scale, r.residual_scale, r.logits_divisor)
                                if r.has_scales else (1.0, 1.0, 1.0))
    x = w.get(Role.TOKEN_EMBED)[np.asarray(ids)] * embed
    post = r.norm_kind == 2  # format 1.10: each sublayer reads x, its output is normed
    # the norm of each sublayer's output: its own (1.10), or another one (1.11, sandwich)
    after = {Role.ATTN_NORM: Role.ATTN_POST_NORM, Role.FFN_NORM: Role.FFN_POST_NORM}

    def pre(x, role, bias, layer):
        return x if post else _norm(w, x, role, bias, layer)

    def out(y, role, layer):
        if r.norm_kind == 3:
            return _rms(y, w.get(after[role], layer), r.rms_eps)
        return _rms(y, w.get(role, layer), r.rms_eps) if post else y

    shortcut = None  # format 1.12: a shortcut layer's MoE output, for the next layer
    for layer, entry in enumerate(image.layers):
        operator = {4: _short_conv, 5: _mamba2, 6: _gated_delta, 7: _kda,
                    8: _mamba1}.get(entry.attn_kind, _attention)
        if entry.attn_kind != 9:  # format 1.14: 9 has no operator
            a = operator(w, pre(x, Role.ATTN_NORM, Role.ATTN_NORM_BIAS, layer), layer)
            x = x + residual * out(a, Role.ATTN_NORM, layer)
        if entry.ffn_kind == FfnKind.NONE:  # nor 3 an FFN
            continue
        h = pre(x, Role.FFN_NORM, Role.FFN_NORM_BIAS, layer)
        if entry.ffn_kind == FfnKind.MOE:
            f = _moe(w, h, layer)
        else:
            f = _swiglu(h, *(_gated(w, role, layer) for role in
                             (Role.DENSE_GATE, Role.DENSE_UP, Role.DENSE_DOWN)), r)
        x = x + residual * out(f, Role.FFN_NORM, layer)
        if shortcut is not None:
            x, shortcut = x + residual * shortcut, None
        if entry.ffn_kind == FfnKind.SHORTCUT:
            shortcut = _moe(w, h, layer)
    head = w.get(Role.TOKEN_EMBED if r.tie_embeddings else Role.LM_HEAD)
    logits = _norm(w, x, Role.OUTPUT_NORM, Role.OUTPUT_NORM_BIAS) @ head.T
    if r.attn_bias & 0x10:  # format 1.2: the LM head's bias
        logits = logits + w.get(Role.LM_HEAD_BIAS)
    return logits / divisor
