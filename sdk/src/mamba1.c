/*
 * mamba1.c - a Mamba (v1) mixer, the operator of a layer whose attn_kind is
 * ATTN_MAMBA1 (format 1.14, Jamba): from the normed input x and the gate z
 * (colibri_ssm_inputs: the convolution of x plus bias, then SiLU); per
 * token the projection of x into dt (ssm_dt_rank), B and C (ssm_state each),
 * each RMS-normed with its weights (Jamba's norms), dt = softplus(DT_PROJ
 * dt + dt_bias) per channel; then per channel c, token by token in position
 * order, S[c][k] = S[c][k] * exp(dt * A[c][k]) + (dt * B[k]) * x[c], y[c] =
 * dot(S[c], C) + D[c] * x[c]; y * silu(z) through the output projection.
 * The state is a Mamba2 layer's with a head per channel (docs/core.md).
 */
#include "colibri_math.h"
#include "kernels.h"
#include "layers.h"
#include "linear.h"

typedef struct mamba1_job {
    const colibri_model *m;
    const layer_view *layer;
    ssm_chunk chunk;
    uint32_t n;
} mamba1_job;

static void scan_channel(void *arg, uint32_t c)
{
    const mamba1_job *job = (const mamba1_job *)arg;
    const colibri_hparams *hp = &job->m->hp;
    uint32_t size = hp->ssm_state, inner = colibri_ssm_inner(hp);
    size_t width = (size_t)hp->ssm_dt_rank + 2u * size;
    const float *a = (const float *)job->layer->mamba1_a.data + (size_t)c * size;
    float *s = job->chunk.after + (size_t)c * size;
    for (uint32_t t = 0; t < job->n; t++) {
        /* chunk.in holds the projection [n][R + 2N]: dt, B, C */
        const float *b = job->chunk.in + (size_t)t * width + hp->ssm_dt_rank, *cv = b + size;
        const float *prev = colibri_ssm_prev(&job->chunk, s, t, (size_t)c * size);
        float *xt = job->chunk.conv + (size_t)t * inner;
        float dt = job->chunk.dt[(size_t)t * inner + c], x = xt[c];
        for (uint32_t k = 0; k < size; k++) {
            float kept = prev != NULL ? prev[k] * colibri_expf(dt * a[k]) : 0.0f;
            s[k] = kept + (dt * b[k]) * x;
        }
        xt[c] = job->m->kernels.dot(s, cv, size) + job->layer->ssm_d[c] * x;
    }
}

/* The chunk's dt, B and C: x's projection into proj, each part normed; dt
 * = softplus(DT_PROJ dt + dt_bias) per channel into chunk->dt (through
 * `low`, [n][R] of free scratch). */
static void time_steps(const colibri_model *m, const layer_view *layer, const ssm_chunk *chunk,
                       float *proj, float *low, workspace *ws, uint32_t n)
{
    const colibri_hparams *hp = &m->hp;
    uint32_t inner = colibri_ssm_inner(hp), rank = hp->ssm_dt_rank, size = hp->ssm_state;
    uint32_t width = rank + 2u * size;
    colibri_linear(m, proj, width, layer->mamba1_x_proj, chunk->conv, width, inner, n, ws->xq);
    for (uint32_t t = 0; t < n; t++) {
        float *row = proj + (size_t)t * width;
        m->kernels.rmsnorm(row, row, layer->mamba1_dt_norm, rank, hp->rms_eps);
        m->kernels.rmsnorm(row + rank, row + rank, layer->mamba1_b_norm, size, hp->rms_eps);
        m->kernels.rmsnorm(row + rank + size, row + rank + size, layer->mamba1_c_norm, size,
                           hp->rms_eps);
        memcpy(low + (size_t)t * rank, row, rank * sizeof(float));
    }
    colibri_linear(m, chunk->dt, inner, layer->mamba1_dt_proj, low, inner, rank, n, ws->xq);
    for (uint32_t t = 0; t < n; t++) {
        for (uint32_t c = 0; c < inner; c++) {
            float *v = chunk->dt + (size_t)t * inner + c;
            *v = colibri_softplusf(*v + layer->ssm_dt_bias[c]);
        }
    }
}

void colibri_mamba1_forward(const colibri_model *m, const layer_view *layer, uint32_t layer_index,
                            colibri_state *state, workspace *ws, uint32_t n)
{
    const colibri_hparams *hp = &m->hp;
    uint32_t inner = colibri_ssm_inner(hp);
    mamba1_job job = {m, layer, {0}, n};
    colibri_ssm_inputs(m, layer, layer_index, state, ws, n, &job.chunk);
    /* the projection where the convolution's input was (free once convolved:
     * R + 2N <= I floats a token), dt's low rows where beta would be */
    time_steps(m, layer, &job.chunk, job.chunk.in, job.chunk.beta, ws, n);
    colibri_ssm_scan(m, scan_channel, &job, n);
    m->kernels.swiglu(job.chunk.z, job.chunk.conv, n * inner); /* silu(z) * y, rows of I */
    colibri_linear(m, ws->ffn_out, hp->hidden_size, layer->ssm_out, job.chunk.z, hp->hidden_size,
                   inner, n, ws->xq);
}
