/*
 * tz_entry.c - the Secure entries of colibri_tz.h, the only code the
 * Non-secure world can call (each a cmse_nonsecure_entry function: GCC
 * clears the registers that could carry Secure values before BXNS, and the
 * linker puts its SG veneer in the Non-secure callable region).
 *
 * Every pointer is checked with cmse_check_address_range (the TT
 * instruction: the SAU, the IDAU and the Non-secure MPU with the caller's
 * privilege) before anything is read or written: a pointer into Secure
 * memory, a range that wraps or leaves one region, or a non-NULL pointer
 * that is not Non-secure even for no bytes, is refused with
 * COLIBRI_TZ_E_POINTER. An entry that uses the state, the ids or the scratch
 * refuses to run inside another (a Non-secure interrupt that preempts a
 * Secure forward pass and calls in again) with COLIBRI_TZ_E_BUSY: the
 * nested call would move the position or the ids under the outer one. The
 * ids are copied into Secure memory before they are checked and used.
 */
#include <arm_cmse.h>
#include <string.h>

#include "board.h"
#include "colibri_tz.h"
#include "tz_secure.h"

#define CONSOLE_CHUNK 64u
#define CONTROL_NPRIV 0x1u

#define TZ_ENTRY __attribute__((cmse_nonsecure_entry))

static struct {
    const colibri_model *model;
    colibri_state *state;
    void *scratch;
    size_t scratch_size;
    int32_t *ids;
    uint32_t max_context;
    uint64_t forward_ticks;
    volatile uint32_t busy; /* an entry that uses the state is running */
} served;

/* What keeps the entries through --gc-sections: nothing Secure calls them,
 * so tz_serve reads this table, which names them all. */
typedef void (*tz_entry_fn)(void);
static volatile const tz_entry_fn entries[] = {
    (tz_entry_fn)colibri_tz_info_get, (tz_entry_fn)colibri_tz_forward,
    (tz_entry_fn)colibri_tz_reset,    (tz_entry_fn)colibri_tz_console_write,
    (tz_entry_fn)colibri_tz_exit,
};

void tz_serve(const colibri_model *model, colibri_state *state, void *scratch, size_t scratch_size,
              int32_t *ids, uint32_t max_context)
{
    (void)entries[0];
    served.model = model;
    served.state = state;
    served.scratch = scratch;
    served.scratch_size = scratch_size;
    served.ids = ids;
    served.max_context = max_context;
}

/* The caller was unprivileged Non-secure code: Thread mode (the entry runs
 * in the caller's mode) with CONTROL_NS.nPRIV set. */
static int caller_unprivileged(void)
{
    uint32_t ipsr, control;
    __asm__ volatile("mrs %0, ipsr" : "=r"(ipsr));
    __asm__ volatile("mrs %0, control_ns" : "=r"(control));
    return ipsr == 0u && (control & CONTROL_NPRIV) != 0u;
}

/* [p, p + size) is Non-secure memory the caller may read (write: and
 * write); NULL only for no bytes, and a non-NULL pointer is checked even
 * then (its first byte). */
static int caller_may(const void *p, uint64_t size, int write)
{
    int flags = CMSE_NONSECURE | (write ? CMSE_MPU_READWRITE : CMSE_MPU_READ) |
                (caller_unprivileged() ? CMSE_MPU_UNPRIV : 0);
    if (p == NULL) {
        return size == 0u;
    }
    return size <= (uint64_t)SIZE_MAX &&
           cmse_check_address_range((void *)(uintptr_t)p, size > 0u ? (size_t)size : 1u, flags) !=
               NULL;
}

static uint64_t logits_bytes(uint32_t n_ids, uint32_t mode, uint32_t vocab)
{
    uint64_t rows = mode == COLIBRI_LOGITS_ALL ? n_ids : mode == COLIBRI_LOGITS_LAST ? 1u : 0u;
    return rows * vocab * sizeof(float);
}

/* The checks every entry that uses the state makes first; then it is busy. */
static int32_t enter(void)
{
    if (served.model == NULL) {
        return COLIBRI_TZ_E_NOT_READY;
    }
    if (served.busy) {
        return COLIBRI_TZ_E_BUSY;
    }
    served.busy = 1u;
    return COLIBRI_OK;
}

static int32_t leave(int32_t status)
{
    served.busy = 0u;
    return status;
}

TZ_ENTRY int32_t colibri_tz_info_get(colibri_tz_info *info)
{
    int32_t status = enter();
    if (status != COLIBRI_OK) {
        return status;
    }
    if (!caller_may(info, sizeof *info, 1)) {
        return leave(COLIBRI_TZ_E_POINTER);
    }
    info->vocab_size = served.model->hp.vocab_size;
    info->max_context = served.state->max_context;
    info->fingerprint = served.model->fingerprint;
    info->pos = served.state->pos;
    info->forward_ticks = served.forward_ticks;
    return leave(COLIBRI_OK);
}

TZ_ENTRY int32_t colibri_tz_forward(const int32_t *ids, uint32_t n_ids, float *logits,
                                    uint32_t mode)
{
    int32_t status = enter();
    if (status != COLIBRI_OK) {
        return status;
    }
    if (!caller_may(ids, (uint64_t)n_ids * sizeof *ids, 0) ||
        !caller_may(logits, logits_bytes(n_ids, mode, served.model->hp.vocab_size), 1)) {
        return leave(COLIBRI_TZ_E_POINTER);
    }
    if (mode > (uint32_t)COLIBRI_LOGITS_NONE) {
        return leave(COLIBRI_E_BAD_ARGUMENT); /* before the enum's narrowing could hide it */
    }
    if (n_ids > served.max_context) {
        return leave(COLIBRI_E_CONTEXT_FULL);
    }
    memcpy(served.ids, ids, (size_t)n_ids * sizeof *ids);
    status = colibri_forward(served.model, served.state, served.ids, n_ids, logits,
                             (colibri_logits_mode)mode, served.scratch, served.scratch_size,
                             &served.forward_ticks);
    return leave(status);
}

TZ_ENTRY int32_t colibri_tz_reset(void)
{
    int32_t status = enter();
    if (status == COLIBRI_OK) {
        colibri_state_reset(served.state);
        status = leave(COLIBRI_OK);
    }
    return status;
}

TZ_ENTRY int32_t colibri_tz_console_write(const char *text, uint32_t n)
{
    char chunk[CONSOLE_CHUNK];
    if (!caller_may(text, n, 0)) {
        return COLIBRI_TZ_E_POINTER;
    }
    for (uint32_t done = 0; done < n;) {
        uint32_t size = n - done < CONSOLE_CHUNK ? n - done : CONSOLE_CHUNK;
        memcpy(chunk, text + done, size);
        board_uart_write((const uint8_t *)chunk, size);
        done += size;
    }
    return COLIBRI_OK;
}

TZ_ENTRY void colibri_tz_exit(int32_t status)
{
    board_exit(status);
}
