/* linear.c - colibri_linear: the matrix products, split by rows into tasks. */
#include "linear.h"

/* Multiply-adds below which a product runs on the calling thread (waking
 * workers costs more); tasks a product is cut into (enough to balance a few
 * threads, few enough that taking one costs nothing), each with at least
 * TASK_MIN_WORK multiply-adds. */
#define PARALLEL_MIN_WORK (1u << 15)
#define TASKS_PER_PRODUCT 16u
#define TASK_MIN_WORK (1u << 14)
/* Rows of a task: a multiple of the SIMD kernels' row block. */
#define TASK_ROW_STEP 4u

typedef struct linear_job {
    const colibri_kernels *kernels;
    float *out;
    size_t out_stride;
    const float *w, *x;
    uint32_t rows, cols, n, rows_per_task;
} linear_job;

static void linear_task(void *arg, uint32_t task)
{
    const linear_job *job = arg;
    uint32_t first = task * job->rows_per_task, left = job->rows - first;
    uint32_t rows = left < job->rows_per_task ? left : job->rows_per_task;
    job->kernels->matmat_f32(job->out + first, job->out_stride, job->w + (size_t)first * job->cols,
                             job->x, rows, job->cols, job->n);
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

void colibri_linear(const colibri_model *m, float *out, size_t out_stride, const float *w,
                    const float *x, uint32_t rows, uint32_t cols, uint32_t n)
{
    uint64_t work = (uint64_t)rows * cols * n;
    linear_job job = {&m->kernels, out, out_stride, w, x, rows, cols, n, rows};
    if (m->port.parallel_for != NULL && work >= PARALLEL_MIN_WORK) {
        job.rows_per_task = rows_per_task(rows, cols, n);
    }
    if (job.rows_per_task == rows) {
        m->kernels.matmat_f32(out, out_stride, w, x, rows, cols, n);
        return;
    }
    m->port.parallel_for(m->port.ctx, (rows + job.rows_per_task - 1u) / job.rows_per_task,
                         linear_task, &job);
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
