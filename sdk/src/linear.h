/* linear.h - n tokens through one weight matrix, or through several at once,
 * on the port's threads. */
#ifndef COLIBRI_LINEAR_H
#define COLIBRI_LINEAR_H

#include "model_internal.h"

/*
 * out[t * out_stride + r] = dot(w row r, x row t) for r < rows, t < n (x rows
 * are cols floats apart). With the port's parallel_for, a large product is
 * split into tasks of whole output rows, never along the sum, so each result
 * is the same bits on any number of threads; without it (bare metal, an
 * interrupt handler) the kernel runs here. A Q8/Q4 matrix first quantizes
 * the n input rows into xq (the workspace's activation blocks, n *
 * ceil(cols / 32) of them; unused for float32) and takes the quantized dot
 * of docs/kernels.md: the same bits for every split and every n. Products
 * that share their input or need nothing from each other: colibri_linear_group.
 */
void colibri_linear(const colibri_model *m, float *out, size_t out_stride, matrix_ref w,
                    const float *x, uint32_t rows, uint32_t cols, uint32_t n, void *xq);

/* Products colibri_linear_group runs in one batch of the port's threads
 * (more are run as several batches): q, k and v, or the gate and up
 * matrices of two routed experts (a top-2 model's decoded token). Small:
 * the list lives on the stack, which may be an interrupt handler's, and a
 * model with more experts per token has the time per token to wake the
 * threads a few more times. */
#define COLIBRI_LINEAR_GROUP_MAX 4u

/* One product of a group: out[t * out_stride + r] = dot(w row r, input row
 * t) for r < rows, t < n; the input `in` is float rows cols floats apart for
 * float32 weights, n * ceil(cols / 32) activation blocks for Q8/Q4
 * (product_input picks). */
typedef struct linear_product {
    float *out;
    const void *in;
    matrix_ref w;
    uint32_t out_stride, rows, cols, n;
} linear_product;

/* The input of a product with weights w: x for float32, xq for Q8/Q4. */
static inline const void *product_input(matrix_ref w, const float *x, const colibri_qblock *xq)
{
    return w.dtype == DTYPE_F32 ? (const void *)x : (const void *)xq;
}

/*
 * Several products, with their inputs ready (Q8/Q4: already quantized by
 * colibri_quantize_rows), as one batch of tasks: the workers are woken and
 * waited for once, not once per product. Each result is the same bits as
 * colibri_linear's; products with n = 0 are skipped. Outputs must not
 * overlap each other or any input.
 */
void colibri_linear_group(const colibri_model *m, const linear_product *products, uint32_t count);

/* Products of one input x (n rows of cols floats): q, k and v, or a short
 * convolution's B, C and X. Each product's `in` is set from x (float32
 * weights) or from x's activation blocks in xq, quantized once when any
 * weight is Q8/Q4; then they run as one group. */
void colibri_linear_shared(const colibri_model *m, linear_product *products, uint32_t count,
                           const float *x, uint32_t cols, uint32_t n, void *xq);

/* Whether any of the products has Q8/Q4 weights (its input must be
 * quantized first). */
static inline int colibri_products_quantized(const linear_product *p, uint32_t count)
{
    for (uint32_t i = 0; i < count; i++) {
        if (p[i].w.dtype != DTYPE_F32) {
            return 1;
        }
    }
    return 0;
}

/* Quantize n rows of cols floats (cols apart) into n * ceil(cols / 32)
 * activation blocks at xq. */
void colibri_quantize_rows(void *xq, const float *x, uint32_t cols, uint32_t n);

/*
 * Run fn(arg, 0) .. fn(arg, n_tasks - 1) on the port's threads when there is
 * a parallel_for and their total work (multiply-adds, roughly) is worth
 * waking the threads for: returns 1. Otherwise returns 0 and the caller runs
 * the tasks itself, by direct calls (so a static stack bound of an
 * interrupt-handler port sees them). The tasks must write disjoint memory.
 */
int colibri_parallel_tasks(const colibri_model *m, uint32_t n_tasks, uint64_t work,
                           colibri_task_fn fn, void *arg);

#endif
