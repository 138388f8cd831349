/*
 * colibri_linux_kernels.c - which kernel table the Linux port gives the core:
 * the first of the tables built into this binary that the CPU can run, in
 * order of preference, or one asked for by name. The probe lives here, in
 * the port; the core only takes the table it is given (docs/kernels.md).
 * colibri_linux_kernel_names lists every table built in, runnable or not.
 */
#include <stdio.h>
#include <string.h>
#if defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20) /* the kernel's bit for the dot-product extension */
#endif
#endif

#include "colibri_linux.h"

/* The tables built into this binary, most preferred first, the reference
 * last: the Makefile passes its KERNELS list. */
#ifndef COLIBRI_LINUX_KERNEL_TABLES
#define COLIBRI_LINUX_KERNEL_TABLES &colibri_kernels_reference,
#endif

static const colibri_kernels *const candidates[] = {COLIBRI_LINUX_KERNEL_TABLES};

#define N_CANDIDATES (sizeof candidates / sizeof candidates[0])

/* What a table needs of the CPU. NEON is part of every AArch64 Linux CPU,
 * its dot-product extension is not (neondot: the Pi 5's Cortex-A76 has it,
 * the Pi 4's Cortex-A72 does not), and the reference runs anywhere. */
static int cpu_can_run(const colibri_kernels *table)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    /* F16C: the quantized kernels' binary16 scales; avx512 runs avx2's. */
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
               __builtin_cpu_supports("f16c");
    int avx512 = avx2 && __builtin_cpu_supports("avx512f");
    if (strcmp(table->name, "avx512vnni") == 0) {
        return avx512 && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni");
    }
    if (strcmp(table->name, "avx512") == 0) {
        return avx512;
    }
    if (strcmp(table->name, "avx2") == 0) {
        return avx2;
    }
#endif
#if defined(__aarch64__)
    if (strcmp(table->name, "neondot") == 0) {
        return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
    }
#endif
    return table != NULL;
}

const colibri_kernels *colibri_linux_kernels(const char *name)
{
    for (size_t i = 0; i < N_CANDIDATES; i++) {
        int wanted = name == NULL || strcmp(name, candidates[i]->name) == 0;
        if (wanted && cpu_can_run(candidates[i])) {
            return candidates[i];
        }
    }
    return NULL;
}

size_t colibri_linux_kernel_names(char *out, size_t size)
{
    size_t used = 0;
    if (size > 0) {
        out[0] = '\0';
    }
    for (size_t i = 0; i < N_CANDIDATES && used < size; i++) {
        int n = snprintf(out + used, size - used, "%s%s", i > 0 ? ", " : "", candidates[i]->name);
        used = n < 0 ? used : used + (size_t)n;
    }
    return used < size ? used : size - 1u;
}
