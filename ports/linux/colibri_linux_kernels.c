/*
 * colibri_linux_kernels.c - which kernel table the Linux port gives the core:
 * the first of the tables built into this binary that the CPU can run, in
 * order of preference, or one asked for by name. The probe lives here, in
 * the port; the core only takes the table it is given (docs/kernels.md).
 */
#include <stdio.h>
#include <string.h>

#include "colibri_linux.h"

typedef struct candidate {
    const colibri_kernels *table;
    int (*cpu_can_run)(void);
} candidate;

static int any_cpu(void)
{
    return 1;
}

/* Preferred first; the reference, which runs anywhere, last. A SIMD table
 * adds one line here with its CPU check (e.g. __builtin_cpu_supports). */
static const candidate candidates[] = {
    {&colibri_kernels_reference, any_cpu},
};

#define N_CANDIDATES (sizeof candidates / sizeof candidates[0])

const colibri_kernels *colibri_linux_kernels(const char *name)
{
    for (size_t i = 0; i < N_CANDIDATES; i++) {
        int wanted = name == NULL || strcmp(name, candidates[i].table->name) == 0;
        if (wanted && candidates[i].cpu_can_run()) {
            return candidates[i].table;
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
        int n =
            snprintf(out + used, size - used, "%s%s", i > 0 ? ", " : "", candidates[i].table->name);
        used = n < 0 ? used : used + (size_t)n;
    }
    return used < size ? used : size - 1u;
}
