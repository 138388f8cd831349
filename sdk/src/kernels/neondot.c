/*
 * neondot.c - the neon table with quantized products on the Armv8.2-A
 * dot-product extension (SDOT: four int8 products added into each int32
 * lane; Cortex-A76 and later, e.g. a Raspberry Pi 5 or a Jetson Orin, not
 * the Pi 4's Cortex-A72). Its fp32 slots are neon.c's (built with it,
 * Makefile KERNEL_NEEDS_neondot). Only the functions here carry the
 * extension (COLIBRI_TARGET_DOTPROD, colibri_compat.h); the Linux port runs
 * the table only where the kernel reports it (HWCAP_ASIMDDP,
 * ports/linux/colibri_linux_kernels.c); a board names it only for a CPU that
 * has it.
 */
#include <arm_neon.h>

#include "colibri_compat.h"
#include "kernels.h"
#include "neon.h"
#include "neon_quant.h"

#define DOTPROD COLIBRI_TARGET_DOTPROD

/* One block's sums of four rows by one token: two SDOTs per row, exact. */
DOTPROD static inline int32x4_t row_isum_dot(int8x16_t wlo, int8x16_t whi, int8x16_t xlo,
                                             int8x16_t xhi)
{
    return vdotq_s32(vdotq_s32(vdupq_n_s32(0), wlo, xlo), whi, xhi);
}

DOTPROD static int32x4_t isum_dot(const neon_qrows *w, int8x16_t xlo, int8x16_t xhi)
{
    return neon_isum4(
        row_isum_dot(w->lo[0], w->hi[0], xlo, xhi), row_isum_dot(w->lo[1], w->hi[1], xlo, xhi),
        row_isum_dot(w->lo[2], w->hi[2], xlo, xhi), row_isum_dot(w->lo[3], w->hi[3], xlo, xhi));
}

DOTPROD static void matmat_q8_neondot(float *out, size_t stride, const uint8_t *w,
                                      const colibri_qblock *x, uint32_t rows, uint32_t cols,
                                      uint32_t n)
{
    neon_q_matmat(out, stride, w, x, rows, cols, n, 0, isum_dot);
}

DOTPROD static void matmat_q4_neondot(float *out, size_t stride, const uint8_t *w,
                                      const colibri_qblock *x, uint32_t rows, uint32_t cols,
                                      uint32_t n)
{
    neon_q_matmat(out, stride, w, x, rows, cols, n, 1, isum_dot);
}

/* softmax and swiglu are the reference's (NULL), as in neon. */
const colibri_kernels colibri_kernels_neondot = {
    .name = "neondot",
    .dot = colibri_neon_dot,
    .matvec_f32 = colibri_neon_matvec,
    .rmsnorm = colibri_neon_rmsnorm,
    .add = colibri_neon_add,
    .add_scaled = colibri_neon_add_scaled,
    .rope_apply = colibri_neon_rope_apply,
    .matmat_f32 = colibri_neon_matmat,
    .matmat_q8 = matmat_q8_neondot,
    .matmat_q4 = matmat_q4_neondot,
};
