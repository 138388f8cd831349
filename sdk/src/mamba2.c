/*
 * mamba2.c - a Mamba2 mixer, the operator of a layer whose attn_kind is
 * ATTN_MAMBA2 (format 1.14, Granite-4.0-H): from the normed input the gate
 * z, the convolution's input (x, B, C) and a time step per head; a causal
 * depthwise convolution plus bias, then SiLU; per head h and token, in
 * position order, dt = softplus(dt + dt_bias[h]) and for each channel p of
 * the head S[p][:] = S[p][:] * exp(dt * A[h]) + (dt * B[:]) * x[p], y[p] =
 * dot(S[p], C) + D[h] * x[p] (B and C of the head's group); then y *
 * silu(z), an RMSNorm per group, and the output projection. The state holds
 * the convolution's last inputs and S, read from the copy that holds the
 * positions before the call and written to the other (docs/core.md,
 * Recurrent state).
 */
#include "colibri_math.h"
#include "kernels.h"
#include "layers.h"
#include "linear.h"

static float silu(float v)
{
    return v / (1.0f + colibri_expf(-v));
}

/* One chunk's scan of every head, one task per head (heads are
 * independent; within a head the tokens go in order). */
typedef struct scan_job {
    const colibri_model *m;
    const layer_view *layer;
    ssm_chunk chunk; /* the state before and after, the convolution's output (y
                      * replaces x), the time steps (softplus applied) */
    uint32_t n;
} scan_job;

static void scan_head(void *arg, uint32_t h)
{
    const scan_job *job = (const scan_job *)arg;
    const colibri_hparams *hp = &job->m->hp;
    uint32_t dim = hp->ssm_head_dim, size = hp->ssm_state, heads = hp->ssm_heads;
    uint32_t inner = colibri_ssm_inner(hp), channels = colibri_conv_channels(hp);
    size_t group = (size_t)(h / (heads / hp->ssm_groups)) * size;
    for (uint32_t p = 0; p < dim; p++) {
        size_t row = ((size_t)h * dim + p) * size;
        float *s = job->chunk.after + row;
        for (uint32_t t = 0; t < job->n; t++) {
            float *xt = job->chunk.conv + (size_t)t * channels;
            const float *b = xt + inner + group, *c = b + (size_t)hp->ssm_groups * size;
            const float *prev = colibri_ssm_prev(&job->chunk, s, t, row);
            float dt = job->chunk.dt[(size_t)t * heads + h], x = xt[(size_t)h * dim + p];
            float decay = colibri_expf(dt * job->layer->ssm_a[h]);
            for (uint32_t k = 0; k < size; k++) {
                float kept = prev != NULL ? prev[k] * decay : 0.0f;
                s[k] = kept + (dt * b[k]) * x;
            }
            xt[(size_t)h * dim + p] = job->m->kernels.dot(s, c, size) + job->layer->ssm_d[h] * x;
        }
    }
}

/* dt[t][h] = softplus(dt[t][h] + dt_bias[h]). */
static void time_steps(const colibri_hparams *hp, float *dt, const float *bias, uint32_t n)
{
    for (uint32_t t = 0; t < n; t++) {
        for (uint32_t h = 0; h < hp->ssm_heads; h++) {
            float *v = dt + (size_t)t * hp->ssm_heads + h;
            float step = colibri_softplusf(*v + bias[h]);
            *v = step < hp->ssm_dt_min ? hp->ssm_dt_min : step; /* Nemotron-H's floor */
        }
    }
}

/* z[t] = y[t] * silu(z[t]) (y: the first I floats of each row of xbc),
 * then an RMSNorm of each group of I / groups with its weights. */
static void gated_norm(const colibri_model *m, const layer_view *layer, float *z, const float *xbc,
                       uint32_t n)
{
    const colibri_hparams *hp = &m->hp;
    uint32_t inner = colibri_ssm_inner(hp), channels = colibri_conv_channels(hp);
    uint32_t width = inner / hp->ssm_groups;
    for (uint32_t t = 0; t < n; t++) {
        float *zt = z + (size_t)t * inner;
        const float *y = xbc + (size_t)t * channels;
        m->kernels.swiglu(zt, y, inner); /* silu(z) * y */
        for (uint32_t g = 0; g < hp->ssm_groups; g++) {
            m->kernels.rmsnorm(zt + (size_t)g * width, zt + (size_t)g * width,
                               layer->ssm_norm + (size_t)g * width, width, hp->rms_eps);
        }
    }
}

static void silu_rows(float *x, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        x[i] = silu(x[i]);
    }
}

void colibri_ssm_inputs(const colibri_model *m, const layer_view *layer, uint32_t layer_index,
                        colibri_state *state, workspace *ws, uint32_t n, ssm_chunk *chunk)
{
    const colibri_hparams *hp = &m->hp;
    uint32_t h = hp->hidden_size, inner = colibri_ssm_inner(hp), heads = hp->ssm_heads;
    uint32_t channels = colibri_conv_channels(hp), taps = hp->conv_kernel;
    uint32_t slot = colibri_layer_slot(m, layer_index);
    float *in = ws->ssm + (size_t)ws->batch * inner;
    float *dst = colibri_recurrent_rows(m, state, 1u - state->conv_copy, slot);
    const float *hist = colibri_rows_before(
        state, ws, colibri_recurrent_rows(m, state, state->conv_copy, slot), dst);
    size_t history = (size_t)(taps - 1u) * channels;
    chunk->z = ws->ssm;
    chunk->conv = in + (size_t)ws->batch * channels;
    chunk->dt = chunk->conv + (size_t)ws->batch * channels;
    chunk->beta = chunk->dt + (size_t)ws->batch * inner;
    chunk->in = in;
    chunk->before = hist != NULL ? hist + history : NULL;
    chunk->after = dst + history;
    const linear_product all[4] = {{chunk->z, NULL, layer->ssm_in_z, inner, inner, h, n},
                                   {in, NULL, layer->ssm_in_xbc, channels, channels, h, n},
                                   {chunk->dt, NULL, layer->ssm_in_dt, heads, heads, h, n},
                                   {chunk->beta, NULL, layer->ssm_in_beta, heads, heads, h, n}};
    linear_product p[4];
    uint32_t count = 0;
    for (uint32_t i = 0; i < 4u; i++) {
        if (all[i].w.data != NULL) {
            p[count++] = all[i];
        }
    }
    colibri_linear_shared(m, p, count, ws->xn, h, n, ws->xq);
    colibri_causal_conv((const float *)layer->ssm_conv_kernel.data, layer->ssm_conv_bias, hist, in,
                        chunk->conv, taps, channels, n);
    colibri_conv_keep(dst, hist, in, taps, channels, n);
    silu_rows(chunk->conv, (size_t)n * channels);
    if (layer->ssm_in_dt.data != NULL) {
        time_steps(hp, chunk->dt, layer->ssm_dt_bias, n);
    }
}

void colibri_ssm_scan(const colibri_model *m, colibri_task_fn fn, void *job, uint32_t n)
{
    const colibri_hparams *hp = &m->hp;
    uint64_t work = (uint64_t)n * colibri_ssm_inner(hp) * hp->ssm_state * 4u;
    if (!colibri_parallel_tasks(m, hp->ssm_heads, work, fn, job)) {
        for (uint32_t head = 0; head < hp->ssm_heads; head++) {
            fn(job, head);
        }
    }
}

void colibri_mamba2_forward(const colibri_model *m, const layer_view *layer, uint32_t layer_index,
                            colibri_state *state, workspace *ws, uint32_t n)
{
    const colibri_hparams *hp = &m->hp;
    scan_job job = {m, layer, {0}, n};
    colibri_ssm_inputs(m, layer, layer_index, state, ws, n, &job.chunk);
    colibri_ssm_scan(m, scan_head, &job, n);
    gated_norm(m, layer, job.chunk.z, job.chunk.conv, n);
    colibri_linear(m, ws->ffn_out, hp->hidden_size, layer->ssm_out, job.chunk.z, hp->hidden_size,
                   colibri_ssm_inner(hp), n, ws->xq);
}
