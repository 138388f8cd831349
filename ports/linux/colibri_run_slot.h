/*
 * colibri_run_slot.h - colibri-run --slots: boot a slot of an A/B store and
 * describe its image as a mapping; confirm an image on trial after a good
 * run (docs/ota.md).
 */
#ifndef COLIBRI_RUN_SLOT_H
#define COLIBRI_RUN_SLOT_H

#include "colibri.h"
#include "colibri_linux.h"
#include "colibri_run_options.h"

/* Open the store, let boot pick a slot, and describe its image as a mapping
 * (not one colibri_linux_unmap may undo: the store owns it). 0, or an exit
 * status after a message. */
int colibri_run_open_slot(const run_options *o, colibri_linux_store *store, colibri_slot_boot *boot,
                          colibri_linux_mapping *map);

/* After the run (rc its status so far): an image on trial that ran well
 * becomes GOOD; the store is closed. Returns the run's status. */
int colibri_run_close_slot(const run_options *o, colibri_linux_store *store,
                           const colibri_slot_boot *boot, int rc);

#endif
