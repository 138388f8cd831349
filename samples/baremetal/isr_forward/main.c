/*
 * isr_forward - call colibri_forward from a timer interrupt handler on a
 * model initialised before, and prove the logits equal the thread-mode
 * logits bit for bit. Prints one result line and exits 0 when equal.
 *
 * Rules shown here (docs/core.md, "Interrupt handlers"): the model is
 * initialised in thread mode first; the handler uses its own state, scratch
 * and logits; the port's interrupt entry saves the whole FP/SIMD context.
 */
#include "board.h"
#include "board_config.h"
#include "colibri.h"
#include "console.h"
#include "model_config.h"

#define N_IDS 8u

typedef struct run_buffers {
    colibri_state state;
    _Alignas(16) uint8_t kv[COLIBRI_MODEL_STATE_BYTES];
    _Alignas(16) uint8_t scratch[COLIBRI_MODEL_SCRATCH_BYTES];
    float logits[COLIBRI_MODEL_VOCAB_SIZE];
    colibri_status status;
} run_buffers;

static colibri_model model;
static run_buffers thread_run, interrupt_run;
static int32_t ids[N_IDS];

static void forward_with(run_buffers *run)
{
    run->status =
        colibri_state_init(&run->state, &model, run->kv, sizeof run->kv, COLIBRI_MODEL_CONTEXT);
    if (run->status == COLIBRI_OK) {
        run->status = colibri_forward(&model, &run->state, ids, N_IDS, run->logits,
                                      COLIBRI_LOGITS_LAST, run->scratch, sizeof run->scratch, NULL);
    }
}

static void in_interrupt(void *arg)
{
    forward_with((run_buffers *)arg);
}

/* Bitwise equality (also tells -0.0 from 0.0 and compares NaN payloads). */
static int same_bits(const float *a, const float *b, size_t n)
{
    const uint8_t *pa = (const uint8_t *)a, *pb = (const uint8_t *)b;
    uint8_t diff = 0;
    for (size_t i = 0; i < n * sizeof(float); i++) {
        diff |= (uint8_t)(pa[i] ^ pb[i]);
    }
    return diff == 0;
}

static void report(const char *what, uint32_t value)
{
    console_puts(what);
    console_put_hex32(value);
}

int main(void)
{
    colibri_options options = {COLIBRI_MODEL_FINGERPRINT, NULL};
    size_t stack_used = 0;
    board_init();
    if (colibri_init(&model, board_weights(), board_weights_size(), &options) != COLIBRI_OK) {
        console_puts("isr_forward: model image not valid\n");
        board_exit(2);
    }
    for (uint32_t i = 0; i < N_IDS; i++) {
        ids[i] = (int32_t)((7u * i + 3u) % COLIBRI_MODEL_VOCAB_SIZE);
    }
    forward_with(&thread_run);
    interrupt_run.status = COLIBRI_E_BAD_ARGUMENT;
    if (board_run_in_interrupt(in_interrupt, &interrupt_run, &stack_used) != 0) {
        console_puts("isr_forward: this board has no timer interrupt\n");
        board_exit(3);
    }
    int same = thread_run.status == COLIBRI_OK && interrupt_run.status == COLIBRI_OK &&
               same_bits(thread_run.logits, interrupt_run.logits, COLIBRI_MODEL_VOCAB_SIZE);
    console_puts("isr_forward on " COLIBRI_BOARD_NAME ": thread == interrupt: ");
    console_puts(same ? "yes" : "NO");
    report(" thread_crc=",
           colibri_crc32_update(0, (const uint8_t *)thread_run.logits, sizeof thread_run.logits));
    report(" interrupt_crc=", colibri_crc32_update(0, (const uint8_t *)interrupt_run.logits,
                                                   sizeof interrupt_run.logits));
    console_puts(" interrupt_stack_bytes=");
    console_put_u64(stack_used);
    console_puts("\n");
    board_exit(same ? 0 : 1);
}
