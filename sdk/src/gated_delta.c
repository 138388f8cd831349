/*
 * gated_delta.c - a gated delta rule layer, the operator of a layer whose
 * attn_kind is ATTN_GATED_DELTA (format 1.14, Qwen3-Next's linear
 * attention, "Gated DeltaNet"). Its inputs are a Mamba2 layer's
 * (colibri_ssm_inputs): the gate z, a convolution (SiLU, no bias) over v
 * (I = heads * head_dim channels), then k and q (ssm_groups key heads of
 * ssm_state each: "B" and "C" of the Mamba2 layout), dt = softplus(a +
 * dt_bias) per value head, and beta = sigmoid(b). k and q are
 * L2-normalized per key head and q scaled by 1 / sqrt(ssm_state); then per
 * value head h (key head h / (heads / groups)) and channel j of it, token
 * by token in position order, with S_j the state row of ssm_state floats:
 * S_j = S_j * exp(dt * A[h]), delta = (v_j - dot(S_j, k)) * beta, S_j +=
 * k * delta, y_j = dot(S_j, q). y is RMS-normed per head (weights of
 * head_dim), times silu(z), and projected by SSM_OUT.
 *
 * A KDA layer (ATTN_KDA, Kimi-Linear) runs the same rule with a decay per
 * key channel: S_j[i] = S_j[i] * exp(g[i]) with g = A[h] * softplus(f +
 * dt_bias) (or, with kda_bound, kda_bound * sigmoid(-A[h] * (f + dt_bias))),
 * f the forget gate projection of the normed input (two factors when
 * kda_rank > 0), and y normed per head times sigmoid of the output gate
 * projection.
 */
#include "colibri_math.h"
#include "kernels.h"
#include "layers.h"
#include "linear.h"

/* The L2 norm's term under the root (the reference implementation's 1e-6). */
#define L2_NORM_EPS 1e-6f

typedef struct delta_job {
    const colibri_model *m;
    const layer_view *layer;
    ssm_chunk chunk;
    uint32_t n;
    int per_channel; /* KDA: chunk.dt holds each key channel's decay factor */
} delta_job;

/* x = x / sqrt(sum(x^2) + 1e-6) * scale over `size` floats. */
static void l2_normalize(float *x, uint32_t size, float scale)
{
    float sum = 0.0f, inv;
    for (uint32_t i = 0; i < size; i++) {
        sum += x[i] * x[i];
    }
    inv = 1.0f / colibri_sqrtf(sum + L2_NORM_EPS);
    for (uint32_t i = 0; i < size; i++) {
        x[i] = x[i] * inv * scale;
    }
}

/* Each token's k and q per key head, normalized; beta = sigmoid(beta). */
static void prepare_keys(const colibri_hparams *hp, const ssm_chunk *chunk, uint32_t n)
{
    uint32_t inner = colibri_ssm_inner(hp), channels = colibri_conv_channels(hp);
    uint32_t keys = hp->ssm_groups * hp->ssm_state;
    float query_scale = 1.0f / colibri_sqrtf((float)hp->ssm_state);
    for (uint32_t t = 0; t < n; t++) {
        float *k = chunk->conv + (size_t)t * channels + inner, *q = k + keys;
        float *beta = chunk->beta + (size_t)t * hp->ssm_heads;
        for (uint32_t g = 0; g < hp->ssm_groups; g++) {
            l2_normalize(k + (size_t)g * hp->ssm_state, hp->ssm_state, 1.0f);
            l2_normalize(q + (size_t)g * hp->ssm_state, hp->ssm_state, query_scale);
        }
        for (uint32_t h = 0; h < hp->ssm_heads; h++) {
            beta[h] = colibri_reference_sigmoid(beta[h]);
        }
    }
}

/* s = prev decayed (zeros without prev): by exp(dt * A[h]), or per key
 * channel by the factors in chunk.dt (KDA). */
static void decay_row(const delta_job *job, float *s, const float *prev, uint32_t t, uint32_t h)
{
    const colibri_hparams *hp = &job->m->hp;
    uint32_t size = hp->ssm_state;
    const float *factor = job->chunk.dt + (size_t)t * colibri_ssm_inner(hp) + (size_t)h * size;
    float decay = 0.0f;
    if (!job->per_channel) {
        decay = colibri_expf(job->chunk.dt[(size_t)t * hp->ssm_heads + h] * job->layer->ssm_a[h]);
    }
    for (uint32_t i = 0; i < size; i++) {
        s[i] = prev == NULL ? 0.0f : prev[i] * (job->per_channel ? factor[i] : decay);
    }
}

static void delta_head(void *arg, uint32_t h)
{
    const delta_job *job = (const delta_job *)arg;
    const colibri_hparams *hp = &job->m->hp;
    uint32_t dim = hp->ssm_head_dim, size = hp->ssm_state, heads = hp->ssm_heads;
    uint32_t inner = colibri_ssm_inner(hp), channels = colibri_conv_channels(hp);
    size_t group = (size_t)(h / (heads / hp->ssm_groups)) * size;
    for (uint32_t j = 0; j < dim; j++) {
        size_t row = ((size_t)h * dim + j) * size;
        float *s = job->chunk.after + row;
        for (uint32_t t = 0; t < job->n; t++) {
            float *vt = job->chunk.conv + (size_t)t * channels;
            const float *k = vt + inner + group, *q = k + (size_t)hp->ssm_groups * size;
            const float *prev = colibri_ssm_prev(&job->chunk, s, t, row);
            float beta = job->chunk.beta[(size_t)t * heads + h], delta;
            decay_row(job, s, prev, t, h);
            delta = (vt[(size_t)h * dim + j] - job->m->kernels.dot(s, k, size)) * beta;
            for (uint32_t i = 0; i < size; i++) {
                s[i] = s[i] + k[i] * delta;
            }
            vt[(size_t)h * dim + j] = job->m->kernels.dot(s, q, size);
        }
    }
}

/* z[t][h] = rmsnorm(y[t][h]) * silu(z[t][h]) per value head (y: the first
 * I floats of each row of the convolution's output); KDA: * sigmoid(z). */
static void normed_gate(const colibri_model *m, const layer_view *layer, const ssm_chunk *chunk,
                        uint32_t n, int sigmoid_gate)
{
    const colibri_hparams *hp = &m->hp;
    uint32_t inner = colibri_ssm_inner(hp), channels = colibri_conv_channels(hp);
    for (uint32_t t = 0; t < n; t++) {
        float *z = chunk->z + (size_t)t * inner, *y = chunk->conv + (size_t)t * channels;
        for (uint32_t h = 0; h < hp->ssm_heads; h++) {
            float *yh = y + (size_t)h * hp->ssm_head_dim;
            m->kernels.rmsnorm(yh, yh, layer->ssm_norm, hp->ssm_head_dim, hp->rms_eps);
        }
        for (uint32_t i = 0; sigmoid_gate && i < inner; i++) {
            z[i] = y[i] * colibri_reference_sigmoid(z[i]);
        }
        if (!sigmoid_gate) {
            m->kernels.swiglu(z, y, inner); /* silu(z) * y */
        }
    }
}

void colibri_gated_delta_forward(const colibri_model *m, const layer_view *layer,
                                 uint32_t layer_index, colibri_state *state, workspace *ws,
                                 uint32_t n)
{
    const colibri_hparams *hp = &m->hp;
    delta_job job = {m, layer, {0}, n, 0};
    colibri_ssm_inputs(m, layer, layer_index, state, ws, n, &job.chunk);
    prepare_keys(hp, &job.chunk, n);
    colibri_ssm_scan(m, delta_head, &job, n);
    normed_gate(m, layer, &job.chunk, n, 0);
    colibri_linear(m, ws->ffn_out, hp->hidden_size, layer->ssm_out, job.chunk.z, hp->hidden_size,
                   colibri_ssm_inner(hp), n, ws->xq);
}

/* out = B (A x) for a rank > 0, else A x: a KDA gate projection of ws->xn
 * (rows of I), through `mid` ([n][rank], free scratch). */
static void gate_projection(const colibri_model *m, workspace *ws, matrix_ref a, matrix_ref b,
                            float *mid, float *out, uint32_t n)
{
    const colibri_hparams *hp = &m->hp;
    uint32_t inner = colibri_ssm_inner(hp), h = hp->hidden_size, rank = hp->kda_rank;
    if (rank == 0u) {
        colibri_linear(m, out, inner, a, ws->xn, inner, h, n, ws->xq);
        return;
    }
    colibri_linear(m, mid, rank, a, ws->xn, rank, h, n, ws->xq);
    colibri_linear(m, out, inner, b, mid, inner, rank, n, ws->xq);
}

/* chunk->dt[t][c] = exp(g) for every channel c of every token (the decay
 * factors), from the forget gate projection already there. */
static void channel_decays(const colibri_model *m, const layer_view *layer, float *dt, uint32_t n)
{
    const colibri_hparams *hp = &m->hp;
    uint32_t inner = colibri_ssm_inner(hp);
    for (uint32_t t = 0; t < n; t++) {
        for (uint32_t c = 0; c < inner; c++) {
            float *v = dt + (size_t)t * inner + c;
            float x = *v + layer->ssm_dt_bias[c], a = layer->ssm_a[c / hp->ssm_state];
            float g = hp->kda_bound != 0.0f ? hp->kda_bound * colibri_reference_sigmoid(-a * x)
                                            : a * colibri_softplusf(x);
            *v = colibri_expf(g);
        }
    }
}

void colibri_kda_forward(const colibri_model *m, const layer_view *layer, uint32_t layer_index,
                         colibri_state *state, workspace *ws, uint32_t n)
{
    const colibri_hparams *hp = &m->hp;
    delta_job job = {m, layer, {0}, n, 1};
    colibri_ssm_inputs(m, layer, layer_index, state, ws, n, &job.chunk);
    gate_projection(m, ws, layer->kda_f_a, layer->kda_f_b, job.chunk.in, job.chunk.dt, n);
    channel_decays(m, layer, job.chunk.dt, n);
    gate_projection(m, ws, layer->kda_g_a, layer->kda_g_b, job.chunk.in, job.chunk.z, n);
    prepare_keys(hp, &job.chunk, n);
    colibri_ssm_scan(m, delta_head, &job, n);
    normed_gate(m, layer, &job.chunk, n, 1);
    colibri_linear(m, ws->ffn_out, hp->hidden_size, layer->ssm_out, job.chunk.z, hp->hidden_size,
                   colibri_ssm_inner(hp), n, ws->xq);
}
