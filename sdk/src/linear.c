/* linear.c - colibri_linear and colibri_linear_group: matrix products split
 * by rows into tasks, several products in one batch of the port's threads;
 * float32 weights through matmat_f32, Q8/Q4 weights (docs/format.md 3.3)
 * through matmat_q8/q4 (or matmat_qk/qkr16, 3.5, 3.6) on input rows quantized
 * once. */
#include "linear.h"
#include "quant.h"

/* Multiply-adds below which a group runs on the calling thread (waking
 * workers costs more); tasks a product is cut into (enough to balance a few
 * threads, few enough that taking one costs nothing), each with at least
 * TASK_MIN_WORK multiply-adds: a decoded token's 1152 x 512 expert matrix
 * is five tasks, not sixteen, since each task a thread takes costs an atomic
 * operation the threads contend for (docs/performance.md, "Threads"). */
#define PARALLEL_MIN_WORK (1u << 15)
#define TASKS_PER_PRODUCT 16u
#define TASK_MIN_WORK (1u << 17)
/* Rows of a task: a multiple of every SIMD kernel's row block (1, 2, 4, 8)
 * and of the 16-row tile of the AVX-512 VNNI decode product, so that no task
 * ends in a part tile, whose missing rows a kernel still computes. */
#define TASK_ROW_STEP 16u

typedef struct group_job {
    const colibri_kernels *kernels;
    const linear_product *products;
    uint32_t count;
    uint32_t first_task[COLIBRI_LINEAR_GROUP_MAX + 1u]; /* product i: tasks [first, next first) */
    uint32_t rows_per_task[COLIBRI_LINEAR_GROUP_MAX];
} group_job;

/* Bytes of one weight row of product p (of 16 rows in a group: first is
 * a multiple of 16, TASK_ROW_STEP). */
static size_t row_bytes(const linear_product *p)
{
    return p->w.dtype == DTYPE_F32 ? (size_t)p->cols * sizeof(float)
                                   : dtype_row_bytes(p->w.dtype, p->cols);
}

/* The quantized product slot of a dtype. */
typedef void (*qmatmat_fn)(float *out, size_t out_stride, const uint8_t *w, const colibri_qblock *x,
                           uint32_t rows, uint32_t cols, uint32_t n);

static qmatmat_fn quantized_product(const colibri_kernels *k, uint32_t dtype)
{
    return dtype == DTYPE_Q8       ? k->matmat_q8
           : dtype == DTYPE_Q4     ? k->matmat_q4
           : dtype == DTYPE_Q8_R16 ? k->matmat_q8r16
                                   : k->matmat_q4r16;
}

/* Output rows [first, first + rows) of product p. */
static void product_rows(const colibri_kernels *k, const linear_product *p, uint32_t first,
                         uint32_t rows)
{
    const uint8_t *w = (const uint8_t *)p->w.data + (size_t)first * row_bytes(p);
    float *out = p->out + first;
    if (p->w.dtype == DTYPE_F32) {
        k->matmat_f32(out, p->out_stride, (const float *)(const void *)w, (const float *)p->in,
                      rows, p->cols, p->n);
    } else if (dtype_superblocks(p->w.dtype)) {
        (dtype_row_groups(p->w.dtype) ? k->matmat_qkr16 : k->matmat_qk)(
            out, p->out_stride, w, (const colibri_qblock *)p->in, rows, p->cols, p->n,
            dtype_qk_bits(p->w.dtype));
    } else {
        quantized_product(k, p->w.dtype)(out, p->out_stride, w, (const colibri_qblock *)p->in, rows,
                                         p->cols, p->n);
    }
}

static void group_task(void *arg, uint32_t task)
{
    const group_job *job = arg;
    uint32_t i = 0, first, left;
    while (task >= job->first_task[i + 1u]) {
        i++;
    }
    first = (task - job->first_task[i]) * job->rows_per_task[i];
    left = job->products[i].rows - first;
    product_rows(job->kernels, &job->products[i], first,
                 left < job->rows_per_task[i] ? left : job->rows_per_task[i]);
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

/* Products [0, count) (count <= COLIBRI_LINEAR_GROUP_MAX) as one batch of
 * tasks; a product with no rows or no tokens gets none. */
static void run_parallel(const colibri_model *m, const linear_product *p, uint32_t count)
{
    group_job job = {&m->kernels, p, count, {0}, {0}};
    for (uint32_t i = 0; i < count; i++) {
        uint32_t tasks = 0;
        if (p[i].rows > 0u && p[i].n > 0u) {
            job.rows_per_task[i] = rows_per_task(p[i].rows, p[i].cols, p[i].n);
            tasks = (p[i].rows + job.rows_per_task[i] - 1u) / job.rows_per_task[i];
        }
        job.first_task[i + 1u] = job.first_task[i] + tasks;
    }
    if (job.first_task[count] == 1u) { /* one task: not worth a wake */
        group_task(&job, 0u);
    } else if (job.first_task[count] > 1u) {
        m->port.parallel_for(m->port.ctx, job.first_task[count], group_task, &job);
    }
}

void colibri_linear_group(const colibri_model *m, const linear_product *products, uint32_t count)
{
    uint64_t work = 0;
    for (uint32_t i = 0; i < count; i++) {
        work += (uint64_t)products[i].rows * products[i].cols * products[i].n;
    }
    if (m->port.parallel_for == NULL || work < PARALLEL_MIN_WORK) {
        for (uint32_t i = 0; i < count; i++) {
            product_rows(&m->kernels, &products[i], 0, products[i].rows);
        }
        return;
    }
    for (uint32_t first = 0; first < count; first += COLIBRI_LINEAR_GROUP_MAX) {
        uint32_t left = count - first;
        run_parallel(m, products + first,
                     left < COLIBRI_LINEAR_GROUP_MAX ? left : COLIBRI_LINEAR_GROUP_MAX);
    }
}

void colibri_quantize_rows(void *xq, const float *x, uint32_t cols, uint32_t n)
{
    uint32_t blocks = colibri_qblocks(cols);
    for (uint32_t t = 0; t < n; t++) {
        colibri_quantize_row((colibri_qblock *)xq + (size_t)t * blocks, x + (size_t)t * cols, cols);
    }
}

void colibri_linear_shared(const colibri_model *m, linear_product *products, uint32_t count,
                           const float *x, uint32_t cols, uint32_t n, void *xq)
{
    for (uint32_t i = 0; i < count; i++) {
        products[i].in = product_input(products[i].w, x, (const colibri_qblock *)xq);
    }
    if (colibri_products_quantized(products, count)) { /* each row once, whatever the split */
        colibri_quantize_rows(xq, x, cols, n);
    }
    colibri_linear_group(m, products, count);
}

void colibri_linear(const colibri_model *m, float *out, size_t out_stride, matrix_ref w,
                    const float *x, uint32_t rows, uint32_t cols, uint32_t n, void *xq)
{
    linear_product p = {out, NULL, w, (uint32_t)out_stride, rows, cols, n};
    colibri_linear_shared(m, &p, 1u, x, cols, n, xq);
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
