/*
 * kernels_here.c - test_kernels.c on a bare-metal board: a firmware holds
 * only the tables its CPU runs (the board file's `kernels`), so every one
 * is checked.
 */
#include <string.h>

#include "colibri.h"

int table_runs_here(const colibri_kernels *table);
int fp32_subnormals_kept(const colibri_kernels *table);

int table_runs_here(const colibri_kernels *table)
{
    return table != 0;
}

/* Helium's (MVE) vector floating-point instructions flush subnormal inputs
 * and results to zero whatever FPSCR.FZ says (QEMU's mps3-an547 does so): the
 * fp32 contract's "subnormals are kept" does not hold for the helium table's
 * fp32 slots, which skip those inputs (docs/kernels.md). The reference (plain
 * C) and every quantized product (integer vectors, scalar FPU) are checked on
 * every input. */
int fp32_subnormals_kept(const colibri_kernels *table)
{
    return strcmp(table->name, "helium") != 0;
}
