/*
 * tz_secure.h - the Secure side of the TrustZone-M split (docs/trustzone.md):
 * what a Secure image calls to serve a model to the Non-secure world.
 */
#ifndef COLIBRI_TZ_SECURE_H
#define COLIBRI_TZ_SECURE_H

#include <stddef.h>
#include <stdint.h>

#include "colibri.h"

/* The model, state and scratch the entries (colibri_tz.h) use, all in
 * Secure memory; from now on the entries answer (before: COLIBRI_TZ_E_NOT_READY).
 * ids: room for max_context ids, where each call's ids are copied first. */
void tz_serve(const colibri_model *model, colibri_state *state, void *scratch, size_t scratch_size,
              int32_t *ids, uint32_t max_context);

/* The SAU from the board file's [trustzone] (Non-secure code and RAM, the
 * Non-secure callable veneers), SecureFault enabled, the FPU and MVE given to
 * the Non-secure world too. */
void tz_secure_setup(void);

/* Run the Non-secure application: its vector table at the start of its code
 * region (VTOR_NS), its stack (MSP_NS), its reset handler. Returns if that
 * handler does. */
void tz_start_nonsecure(void);

#endif
