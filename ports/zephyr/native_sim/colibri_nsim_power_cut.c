/*
 * colibri_nsim_power_cut.c - native_sim only, runner side (host C library):
 * power cuts at flash steps of the A/B slots (CONFIG_COLIBRI_NATIVE_SIM_POWER_CUT).
 *
 * The Zephyr side (colibri_zephyr_slots.c) calls colibri_nsim_flash_step()
 * before every erase of a sector and every program: steps are numbered from
 * 1 in the order they happen and each is traced on stdout
 * ("colibri flash step N: erase|program 0xOFFSET +SIZE"). With
 * --colibri-power-cut=N the process kills itself (SIGKILL) at step N: before
 * it, or with --colibri-power-cut-torn after the first half of a program's
 * bytes reached the flash. The flash simulator keeps its flash in a file
 * mapped shared (--flash=FILE): what was written before the cut is in the
 * file, nothing after it. The next start of the executable on that file is
 * the next power-on.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "nsi_cmdline.h"
#include "nsi_tasks.h"
#include "nsi_tracing.h"

static uint32_t cut_at; /* --colibri-power-cut: 0 never */
static bool cut_torn;   /* --colibri-power-cut-torn */
static uint32_t step;   /* flash steps so far */

static void colibri_nsim_power_cut_options(void)
{
    static struct args_struct_t options[] = {
        {.option = "colibri-power-cut",
         .name = "step",
         .type = 'u',
         .dest = (void *)&cut_at,
         .descript = "Cut the power (SIGKILL) at this flash step of the Colibri slots "
                     "(1 = the first erase or program)"},
        {.is_switch = true,
         .option = "colibri-power-cut-torn",
         .type = 'b',
         .dest = (void *)&cut_torn,
         .descript = "A program cut by --colibri-power-cut writes the first half of its "
                     "bytes first"},
        ARG_TABLE_ENDMARKER,
    };
    nsi_add_command_line_opts(options);
}

NSI_TASK(colibri_nsim_power_cut_options, PRE_BOOT_1, 10);

/* 0: do the step; 1: cut before it; 2: cut after half of it (programs). */
int colibri_nsim_flash_step(int program, uint64_t offset, uint64_t size)
{
    step++;
    printf("colibri flash step %u: %s 0x%llx +%llu\n", step, program ? "program" : "erase",
           (unsigned long long)offset, (unsigned long long)size);
    fflush(stdout);
    if (step != cut_at) {
        return 0;
    }
    return program && cut_torn ? 2 : 1;
}

void colibri_nsim_power_off(void)
{
    printf("colibri power cut at flash step %u%s\n", step, cut_torn ? " (torn)" : "");
    fflush(stdout);
    kill(getpid(), SIGKILL);
    for (;;) {
        pause();
    }
}
