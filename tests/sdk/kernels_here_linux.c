/*
 * kernels_here_linux.c - test_kernels.c on Linux: a table runs here if the
 * Linux port's CPU probe would hand it out (ports/linux/colibri_linux_kernels.c),
 * so the test checks the probe's choices too.
 */
#include "colibri_linux.h"

int table_runs_here(const colibri_kernels *table);
int fp32_subnormals_kept(const colibri_kernels *table);

int table_runs_here(const colibri_kernels *table)
{
    return colibri_linux_kernels(table->name) == table;
}

/* x86-64 SSE/AVX and AArch64 Advanced SIMD keep them (no FTZ/DAZ, FPCR.FZ 0). */
int fp32_subnormals_kept(const colibri_kernels *table)
{
    (void)table;
    return 1;
}
