/* linear.c - colibri_linear: the matrix products, split by rows into tasks;
 * float32 weights through matmat_f32, Q8/Q4 weights (docs/format.md 3.3)
 * through matmat_q8/q4 on the input rows quantized once per product. */
#include "linear.h"
#include "quant.h"

/* Multiply-adds below which a product runs on the calling thread (waking
 * workers costs more); tasks a product is cut into (enough to balance a few
 * threads, few enough that taking one costs nothing), each with at least
 * TASK_MIN_WORK multiply-adds. */
#define PARALLEL_MIN_WORK (1u << 15)
#define TASKS_PER_PRODUCT 16u
#define TASK_MIN_WORK (1u << 14)
/* Rows of a task: a multiple of every SIMD kernel's row block (1, 2, 4, 8)
 * and of the 16-row tile of the AVX-512 VNNI decode product, so that no task
 * ends in a part tile, whose missing rows a kernel still computes. */
#define TASK_ROW_STEP 16u

typedef struct linear_job {
    const colibri_kernels *kernels;
    float *out;
    size_t out_stride;
    matrix_ref w;
    const float *x;           /* float32 weights: the input rows */
    const colibri_qblock *xq; /* Q8/Q4 weights: the input rows quantized */
    uint32_t rows, cols, n, rows_per_task;
} linear_job;

/* Bytes of one weight row of the job's dtype. */
static size_t row_bytes(const linear_job *job)
{
    uint32_t block = job->w.dtype == DTYPE_Q8 ? COLIBRI_Q8_BLOCK_BYTES : COLIBRI_Q4_BLOCK_BYTES;
    return job->w.dtype == DTYPE_F32 ? (size_t)job->cols * sizeof(float)
                                     : (size_t)colibri_qblocks(job->cols) * block;
}

/* Output rows [first, first + rows) of the product. */
static void linear_rows(const linear_job *job, uint32_t first, uint32_t rows)
{
    const colibri_kernels *k = job->kernels;
    const uint8_t *w = (const uint8_t *)job->w.data + (size_t)first * row_bytes(job);
    float *out = job->out + first;
    if (job->w.dtype == DTYPE_Q8) {
        k->matmat_q8(out, job->out_stride, w, job->xq, rows, job->cols, job->n);
    } else if (job->w.dtype == DTYPE_Q4) {
        k->matmat_q4(out, job->out_stride, w, job->xq, rows, job->cols, job->n);
    } else {
        k->matmat_f32(out, job->out_stride, (const float *)(const void *)w, job->x, rows, job->cols,
                      job->n);
    }
}

static void linear_task(void *arg, uint32_t task)
{
    const linear_job *job = arg;
    uint32_t first = task * job->rows_per_task, left = job->rows - first;
    linear_rows(job, first, left < job->rows_per_task ? left : job->rows_per_task);
}

/* 32-bit arithmetic only (cols * n <= 2^20 * 256 fits): no 64-bit division
 * for a 32-bit target's library to do. */
static uint32_t rows_per_task(uint32_t rows, uint32_t cols, uint32_t n)
{
    uint32_t per_row = cols * n, want = rows / TASKS_PER_PRODUCT;
    if (want * per_row < TASK_MIN_WORK) {
        want = TASK_MIN_WORK / per_row;
    }
    want = (want + TASK_ROW_STEP - 1u) / TASK_ROW_STEP * TASK_ROW_STEP;
    if (want < TASK_ROW_STEP) {
        want = TASK_ROW_STEP;
    }
    return want < rows ? want : rows;
}

uint32_t colibri_linear(const colibri_model *m, float *out, size_t out_stride, matrix_ref w,
                        const float *x, uint32_t rows, uint32_t cols, uint32_t n, void *xq,
                        uint32_t xq_ready)
{
    uint64_t work = (uint64_t)rows * cols * n;
    linear_job job = {&m->kernels, out,  out_stride, w,   x, (const colibri_qblock *)xq,
                      rows,        cols, n,          rows};
    if (w.dtype != DTYPE_F32 && !xq_ready) { /* each input row quantized once, whatever the split */
        uint32_t blocks = colibri_qblocks(cols);
        for (uint32_t t = 0; t < n; t++) {
            colibri_quantize_row((colibri_qblock *)xq + (size_t)t * blocks, x + (size_t)t * cols,
                                 cols);
        }
        xq_ready = 1u;
    }
    if (m->port.parallel_for != NULL && work >= PARALLEL_MIN_WORK) {
        job.rows_per_task = rows_per_task(rows, cols, n);
    }
    if (job.rows_per_task == rows) {
        linear_rows(&job, 0, rows);
    } else {
        m->port.parallel_for(m->port.ctx, (rows + job.rows_per_task - 1u) / job.rows_per_task,
                             linear_task, &job);
    }
    return xq_ready;
}

int colibri_parallel_tasks(const colibri_model *m, uint32_t n_tasks, uint64_t work,
                           colibri_task_fn fn, void *arg)
{
    if (m->port.parallel_for == NULL || n_tasks < 2u || work < PARALLEL_MIN_WORK) {
        return 0;
    }
    m->port.parallel_for(m->port.ctx, n_tasks, fn, arg);
    return 1;
}
