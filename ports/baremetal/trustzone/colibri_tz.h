/*
 * colibri_tz.h - the Secure engine as the Non-secure application sees it
 * (TrustZone-M, docs/trustzone.md). The Secure image owns the model image,
 * the engine's state, scratch and the console; these are its entries, each
 * a cmse_nonsecure_entry function reached through its veneer (the Secure
 * build's import library). One call runs a whole forward pass: the world is
 * crossed once per call, not per layer.
 *
 * Every pointer argument must be Non-secure memory the caller may read (or,
 * for what the call writes, write), in one SAU/IDAU/MPU region, with the
 * caller's privilege: else the call does nothing and returns
 * COLIBRI_TZ_E_POINTER (NULL only where no bytes are read or written). The
 * entries that use the state (info, forward, reset) run one at a time: one
 * called from a Non-secure interrupt that preempted another returns
 * COLIBRI_TZ_E_BUSY. Call forward from Thread mode: from a handler it runs
 * on the Secure handler stack, which a pass may outgrow (a fault ends the
 * run). The statuses are colibri_status values (colibri.h) or these.
 */
#ifndef COLIBRI_TZ_H
#define COLIBRI_TZ_H

#include <stddef.h>
#include <stdint.h>

#define COLIBRI_TZ_E_POINTER 1000   /* a pointer argument is not the caller's Non-secure memory */
#define COLIBRI_TZ_E_NOT_READY 1001 /* the Secure side refused the image at boot */
#define COLIBRI_TZ_E_BUSY 1002      /* called from an interrupt that preempted another entry */

/* What the Secure side serves. */
typedef struct colibri_tz_info {
    uint32_t vocab_size;    /* floats in a row of logits */
    uint32_t max_context;   /* positions the Secure state holds */
    uint32_t fingerprint;   /* the image's (colibri_model.fingerprint) */
    uint32_t pos;           /* positions filled so far */
    uint64_t forward_ticks; /* the Secure side's tick count of the last forward pass alone
                             * (colibri_forward's, SysTick cycles), 0 before the first */
} colibri_tz_info;

/* The model's facts; 0 or COLIBRI_TZ_E_POINTER, COLIBRI_TZ_E_NOT_READY. */
int32_t colibri_tz_info_get(colibri_tz_info *info);

/* colibri_forward on the Secure state: ids[0 .. n_ids) at the next positions,
 * logits as `mode` asks (colibri_logits_mode: n_ids rows for ALL, one for LAST,
 * none and logits NULL for NONE). Four arguments: an entry's arguments must
 * all be in registers. */
int32_t colibri_tz_forward(const int32_t *ids, uint32_t n_ids, float *logits, uint32_t mode);

/* Forget every position of the Secure state. */
int32_t colibri_tz_reset(void);

/* Write n bytes of text to the console (the Secure side's UART). */
int32_t colibri_tz_console_write(const char *text, uint32_t n);

/* End the run with this status (semihosting under QEMU). Does not return. */
void colibri_tz_exit(int32_t status);

#endif
