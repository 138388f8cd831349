/*
 * main.c - the kernel contract test (tests/sdk/test_kernels.c) on a Zephyr
 * target: every SIMD kernel table the Colibri module built for it (Kconfig
 * COLIBRI_KERNELS_*; the reference is checked on the host and the bare-metal
 * boards), bit for bit against the contract of docs/kernels.md,
 * and the table colibri_zephyr_port() gives the core is the first the
 * options chose. Ends with twister's PROJECT EXECUTION line.
 */
#include <stdio.h>
#include <string.h>
#include <zephyr/sys/util.h>

#include "colibri.h"
#include "colibri_zephyr.h"

int colibri_test_kernels_main(int argc, char **argv);

int main(void)
{
    const char *want = IS_ENABLED(CONFIG_COLIBRI_KERNELS_HELIUM) ? "helium"
                       : IS_ENABLED(CONFIG_COLIBRI_KERNELS_DSP)  ? "dsp"
                                                                 : "reference";
    const char *got = colibri_zephyr_port()->kernels->name;
    static char name[] = "test_kernels", helium[] = "helium", dsp[] = "dsp";
    char *argv[4] = {name};
    int argc = 1;
    if (IS_ENABLED(CONFIG_COLIBRI_KERNELS_HELIUM)) {
        argv[argc++] = helium;
    }
    if (IS_ENABLED(CONFIG_COLIBRI_KERNELS_DSP)) {
        argv[argc++] = dsp;
    }
    printf("port kernels: %s\n", got);
    int failed = strcmp(got, want) != 0 || argc == 1;
    failed |= colibri_test_kernels_main(argc, argv) != 0;
    printf("PROJECT EXECUTION %s\n", failed ? "FAILED" : "SUCCESSFUL");
    return 0;
}
