/*
 * kernels_here.c - test_kernels.c on a bare-metal board: a firmware holds
 * only the tables its CPU runs (the board file's `kernels`), so every one
 * is checked.
 */
#include "colibri.h"

int table_runs_here(const colibri_kernels *table);
int fp32_subnormals_kept(void);

int table_runs_here(const colibri_kernels *table)
{
    return table != 0;
}

/* Helium's (MVE) vector floating-point instructions flush subnormal inputs
 * and results to zero whatever FPSCR.FZ says (QEMU's mps3-an547 does so),
 * and GCC vectorises some fp32 loops of the reference and of this test with
 * them: the fp32 contract's "subnormals are kept" does not hold here, so the
 * fp32 slots skip those inputs (docs/kernels.md). The quantized products
 * (integer vectors, scalar FPU) are checked on every input. */
int fp32_subnormals_kept(void)
{
    return 0;
}
