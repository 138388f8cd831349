/*
 * colibri_run_slot.c - colibri-run --slots (colibri_run_slot.h).
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "colibri_run_slot.h"

#define EXIT_RUNTIME 1

/* --slots: open the store, let boot pick a slot, and describe its image as
 * a mapping (not one colibri_linux_unmap may undo: the store owns it). */
int colibri_run_open_slot(const run_options *o, colibri_linux_store *store, colibri_slot_boot *boot,
                          colibri_linux_mapping *map)
{
    char err[1024];
    if (colibri_linux_store_open(store, o->model_path, 4096, o->have_key ? o->trusted_key : NULL,
                                 err, sizeof err) != COLIBRI_LINUX_OK) {
        fprintf(stderr, PROG ": error: %s\n", err);
        return EXIT_RUNTIME;
    }
    colibri_status st = colibri_slot_boot_select(&store->slots, boot);
    for (uint32_t i = 0; i < 2; i++) {
        if (boot->rejected & (1u << i)) {
            fprintf(stderr,
                    PROG ": %s: slot %c failed (verification, or a first run that never "
                         "confirmed it) and is marked bad\n",
                    o->model_path, 'A' + (int)i);
        }
    }
    if (st != COLIBRI_OK) {
        fprintf(stderr, PROG ": error: %s: no slot to run: %s (status %d)\n", o->model_path,
                colibri_strerror(st), (int)st);
        colibri_linux_store_close(store);
        return EXIT_RUNTIME;
    }
    memset(map, 0, sizeof *map);
    map->data = (const uint8_t *)boot->image;
    map->size = (size_t)boot->size;
    map->image_size = boot->size;
    map->page_size = (size_t)sysconf(_SC_PAGESIZE);
    map->fd = -1;
    fprintf(stderr, PROG ": %s: running slot %c%s\n", o->model_path, 'A' + (int)boot->slot,
            boot->on_trial ? " (new image, on trial)" : "");
    return 0;
}

/* After the run: an image on trial that ran well becomes GOOD. */
int colibri_run_close_slot(const run_options *o, colibri_linux_store *store,
                           const colibri_slot_boot *boot, int rc)
{
    if (boot->on_trial && rc == 0 && !o->no_confirm) {
        colibri_status st = colibri_slot_confirm(&store->slots, boot->slot);
        if (st != COLIBRI_OK) {
            fprintf(stderr, PROG ": error: %s: cannot confirm slot %c: %s\n", o->model_path,
                    'A' + (int)boot->slot, colibri_strerror(st));
            rc = EXIT_RUNTIME;
        } else {
            fprintf(stderr, PROG ": %s: slot %c confirmed\n", o->model_path, 'A' + (int)boot->slot);
        }
    }
    colibri_linux_store_close(store);
    return rc;
}
