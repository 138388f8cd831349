/*
 * tz_entry.c - the Secure entries of colibri_tz.h, the only code the
 * Non-secure world can call (each a cmse_nonsecure_entry function: GCC
 * clears the registers that could carry Secure values before BXNS, and the
 * linker puts its SG veneer in the Non-secure callable region).
 *
 * Every pointer is checked with cmse_check_address_range (the TT
 * instruction: the SAU, IDAU and the Non-secure MPU as the caller sees
 * them) for the bytes the call reads or writes, before anything is read or
 * written: a pointer into Secure memory, or a range that wraps, is refused
 * with COLIBRI_TZ_E_POINTER. The ids are copied into Secure memory before
 * they are checked and used, so a Non-secure interrupt cannot change them
 * in between.
 */
#include <arm_cmse.h>
#include <string.h>

#include "board.h"
#include "colibri_tz.h"
#include "tz_secure.h"

#define CONSOLE_CHUNK 64u

#define TZ_ENTRY __attribute__((cmse_nonsecure_entry))

static struct {
    const colibri_model *model;
    colibri_state *state;
    void *scratch;
    size_t scratch_size;
    int32_t *ids;
    uint32_t max_context;
    uint64_t forward_ticks;
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

/* [p, p + size) is Non-secure memory the caller may read (write: and write). */
static int caller_may(const void *p, uint64_t size, int write)
{
    int flags = CMSE_NONSECURE | (write ? CMSE_MPU_READWRITE : CMSE_MPU_READ);
    if (size == 0u) {
        return 1;
    }
    return size <= (uint64_t)SIZE_MAX && p != NULL &&
           cmse_check_address_range((void *)(uintptr_t)p, (size_t)size, flags) != NULL;
}

static uint64_t logits_bytes(uint32_t n_ids, uint32_t mode, uint32_t vocab)
{
    uint64_t rows = mode == COLIBRI_LOGITS_ALL ? n_ids : mode == COLIBRI_LOGITS_LAST ? 1u : 0u;
    return rows * vocab * sizeof(float);
}

TZ_ENTRY int32_t colibri_tz_info_get(colibri_tz_info *info)
{
    if (served.model == NULL) {
        return COLIBRI_TZ_E_NOT_READY;
    }
    if (!caller_may(info, sizeof *info, 1)) {
        return COLIBRI_TZ_E_POINTER;
    }
    info->vocab_size = served.model->hp.vocab_size;
    info->max_context = served.state->max_context;
    info->fingerprint = served.model->fingerprint;
    info->pos = served.state->pos;
    info->forward_ticks = served.forward_ticks;
    return COLIBRI_OK;
}

TZ_ENTRY int32_t colibri_tz_forward(const int32_t *ids, uint32_t n_ids, float *logits,
                                    uint32_t mode)
{
    colibri_status status;
    if (served.model == NULL) {
        return COLIBRI_TZ_E_NOT_READY;
    }
    if (n_ids > served.max_context) {
        return COLIBRI_E_CONTEXT_FULL;
    }
    if (!caller_may(ids, (uint64_t)n_ids * sizeof *ids, 0) ||
        !caller_may(logits, logits_bytes(n_ids, mode, served.model->hp.vocab_size), 1)) {
        return COLIBRI_TZ_E_POINTER;
    }
    memcpy(served.ids, ids, (size_t)n_ids * sizeof *ids);
    status = colibri_forward(served.model, served.state, served.ids, n_ids, logits,
                             (colibri_logits_mode)mode, served.scratch, served.scratch_size,
                             &served.forward_ticks);
    return status;
}

TZ_ENTRY int32_t colibri_tz_reset(void)
{
    if (served.model == NULL) {
        return COLIBRI_TZ_E_NOT_READY;
    }
    colibri_state_reset(served.state);
    return COLIBRI_OK;
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
