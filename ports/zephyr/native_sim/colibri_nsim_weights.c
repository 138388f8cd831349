/*
 * colibri_nsim_weights.c - native_sim only, runner side (host C library, not
 * the Zephyr image): before Zephyr boots, map a model image file read-only
 * at the weights address, so that firmware reading the image from a fixed
 * address (colibri_zephyr_weights()) runs unchanged on a PC.
 *
 * The region [address, address + size) is first reserved as zero-filled
 * read-only memory, then the file is mapped over its start: reads past the
 * file's end see zeros instead of faulting. The file is the one given with
 * --colibri-weights=FILE, else the build's COLIBRI_MODEL_DIR/model.bin.
 * colibri_nsim_config.h is written by ports/zephyr/CMakeLists.txt.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "colibri_nsim_config.h"
#include "nsi_cmdline.h"
#include "nsi_tasks.h"
#include "nsi_tracing.h"

static char *cmdline_path; /* --colibri-weights; NULL when not given */

static void colibri_nsim_options(void)
{
    static struct args_struct_t options[] = {
        {.option = "colibri-weights",
         .name = "file",
         .type = 's',
         .dest = (void *)&cmdline_path,
         .descript = "Colibri model image to map at the devicetree weights address "
                     "(default: the model.bin the firmware was built for)"},
        ARG_TABLE_ENDMARKER,
    };
    nsi_add_command_line_opts(options);
}

NSI_TASK(colibri_nsim_options, PRE_BOOT_1, 10);

static void reserve_region(void *base, size_t size)
{
    void *got =
        mmap(base, size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (got != base) {
        nsi_print_error_and_exit("colibri: cannot reserve the weights region at %p (%zu bytes): "
                                 "%s\n",
                                 base, size, got == MAP_FAILED ? strerror(errno) : "address taken");
    }
}

static size_t file_size_or_exit(int fd, const char *path, size_t region_size)
{
    struct stat st;
    if (fstat(fd, &st) != 0) {
        nsi_print_error_and_exit("colibri: %s: %s\n", path, strerror(errno));
    }
    if (st.st_size <= 0 || (uint64_t)st.st_size > region_size) {
        nsi_print_error_and_exit("colibri: %s: %lld bytes, the weights region holds %zu\n", path,
                                 (long long)st.st_size, region_size);
    }
    return (size_t)st.st_size;
}

static void colibri_nsim_map(void)
{
    const char *path = cmdline_path != NULL ? cmdline_path : COLIBRI_NSIM_WEIGHTS_FILE;
    void *base = (void *)(uintptr_t)COLIBRI_NSIM_WEIGHTS_ADDRESS;
    size_t region = (size_t)COLIBRI_NSIM_WEIGHTS_SIZE;
    if (path[0] == '\0') {
        nsi_print_error_and_exit("colibri: no model image: pass --colibri-weights=FILE\n");
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        nsi_print_error_and_exit("colibri: %s: %s\n", path, strerror(errno));
    }
    size_t size = file_size_or_exit(fd, path, region);
    reserve_region(base, region);
    if (mmap(base, size, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0) != base) {
        nsi_print_error_and_exit("colibri: cannot map %s at %p: %s\n", path, base, strerror(errno));
    }
    close(fd);
}

NSI_TASK(colibri_nsim_map, PRE_BOOT_2, 10);
