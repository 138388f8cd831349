/*
 * tz_app - a Non-secure application of the TrustZone-M split
 * (docs/trustzone.md): it runs the model through the Secure entries of
 * colibri_tz.h and shows what the split keeps from it. It never sees a
 * weight: the model image, the state and the scratch are Secure.
 *
 *   make firmware-tz BOARD=qemu_an547 MODEL_DIR=out/model TRUSTED_KEY=keys/release.pub
 *
 * Lines (tests/ports/cortex_m/test_trustzone.py reads them):
 *   tz: info vocab=V context=C fingerprint=F pos=P      or  tz: info status=S
 *   logits ROW 0x... (the 8-id prompt of board_selftest_m, every position)
 *   tz: forward status=0 total_ticks=T secure_ticks=U   (T around the call, the Non-secure
 *       SysTick; U the Secure side's count of the pass alone)
 *   tz: preempted forward status=0 interrupted=yes nested_reset=1002 fp_registers=clear
 *       (a second pass with the Non-secure SysTick handler calling in)
 *   tz: refused <what> status=S                          (pointers the Secure side must refuse)
 *   tz: reading the weights at 0x...                     (then the Secure side's FAULT line)
 */
#include <string.h>

#include "board.h"
#include "board_config.h"
#include "colibri.h"
#include "colibri_tz.h"
#include "console.h"
#include "tz_config.h"

#define N_IDS 8u
#define MAX_VOCAB 4096u
#define EXIT_NOT_SERVED 3
#define EXIT_FORWARD 4
#define EXIT_NOT_REFUSED 5

uint64_t tz_ns_ticks(void);
extern void (*volatile tz_ns_tick_hook)(void);

static float logits[N_IDS * MAX_VOCAB];
static int32_t ids[N_IDS];

static void put_status(const char *what, int32_t status)
{
    console_puts(what);
    console_puts(" status=");
    console_put_u64((uint64_t)(uint32_t)status);
    console_puts("\n");
}

static void print_logits(uint32_t vocab)
{
    for (uint32_t row = 0; row < N_IDS; row++) {
        console_puts("logits ");
        console_put_u64(row);
        for (uint32_t i = 0; i < vocab; i++) {
            uint32_t bits;
            memcpy(&bits, &logits[row * vocab + i], sizeof bits);
            console_puts(" ");
            console_put_hex32(bits);
        }
        console_puts("\n");
    }
}

static colibri_tz_info served(void)
{
    colibri_tz_info info = {0};
    int32_t status = colibri_tz_info_get(&info);
    if (status != COLIBRI_OK || info.vocab_size > MAX_VOCAB || info.max_context < N_IDS) {
        put_status("tz: info", status);
        board_exit(EXIT_NOT_SERVED);
    }
    console_puts("tz: info vocab=");
    console_put_u64(info.vocab_size);
    console_puts(" context=");
    console_put_u64(info.max_context);
    console_puts(" fingerprint=");
    console_put_hex32(info.fingerprint);
    console_puts(" pos=");
    console_put_u64(info.pos);
    console_puts(" forward_ticks=");
    console_put_u64(info.forward_ticks);
    console_puts("\n");
    return info;
}

static void run_prompt(uint32_t vocab)
{
    uint64_t start;
    int32_t status;
    for (uint32_t i = 0; i < N_IDS; i++) {
        ids[i] = (int32_t)((7u * i + 3u) % vocab);
    }
    start = tz_ns_ticks();
    status = colibri_tz_forward(ids, N_IDS, logits, COLIBRI_LOGITS_ALL);
    uint64_t total = tz_ns_ticks() - start;
    if (status != COLIBRI_OK) {
        put_status("tz: forward", status);
        board_exit(EXIT_FORWARD);
    }
    colibri_tz_info info = {0};
    (void)colibri_tz_info_get(&info);
    print_logits(vocab);
    console_puts("tz: forward status=0 total_ticks=");
    console_put_u64(total);
    console_puts(" secure_ticks=");
    console_put_u64(info.forward_ticks);
    console_puts("\n");
}

/* What a Non-secure interrupt in the middle of a Secure pass sees. */
static volatile struct {
    uint32_t armed, done, fp_or;
    int32_t nested;
} preempt;

/* The FP/MVE registers s0 .. s31 (q0 .. q7), or-ed: 0 when all are clear. */
static uint32_t fp_registers(void)
{
    uint32_t words[32], acc = 0;
    __asm__ volatile("vstmia %0, {s0-s31}" : : "r"(words) : "memory");
    for (uint32_t i = 0; i < 32u; i++) {
        acc |= words[i];
    }
    return acc;
}

static void on_tick(void)
{
    if (preempt.armed && !preempt.done) {
        preempt.fp_or = fp_registers();
        preempt.nested = colibri_tz_reset();
        preempt.done = 1u;
    }
}

/* A second forward pass (the next positions, no logits) with the SysTick
 * handler calling in: the nested call is refused, the registers were clear. */
static void preempted_pass(void)
{
    int32_t status;
    tz_ns_tick_hook = on_tick;
    preempt.armed = 1u;
    status = colibri_tz_forward(ids, N_IDS, NULL, COLIBRI_LOGITS_NONE);
    preempt.armed = 0u;
    tz_ns_tick_hook = NULL;
    console_puts("tz: preempted forward status=");
    console_put_u64((uint64_t)(uint32_t)status);
    console_puts(" interrupted=");
    console_puts(preempt.done ? "yes" : "no");
    console_puts(" nested_reset=");
    console_put_u64((uint64_t)(uint32_t)preempt.nested);
    console_puts(" fp_registers=");
    console_puts(preempt.fp_or == 0u ? "clear" : "LEAKED");
    console_puts("\n");
}

static void expect_refused(const char *what, int32_t status)
{
    console_puts("tz: refused ");
    put_status(what, status);
    if (status != COLIBRI_TZ_E_POINTER) {
        board_exit(EXIT_NOT_REFUSED);
    }
}

/* Pointers into Secure memory, or ranges that leave the caller's: each refused. */
static void refused_pointers(uint32_t vocab)
{
    const int32_t *secure_ids = (const int32_t *)(uintptr_t)COLIBRI_BOARD_WEIGHTS_ADDR;
    float *secure_ram = (float *)(uintptr_t)TZ_SECURE_RAM_ADDR;
    float *past_end = (float *)(uintptr_t)(TZ_NS_RAM_ADDR + TZ_NS_RAM_SIZE - 4u * vocab + 4u);
    expect_refused("ids_in_the_weights", colibri_tz_forward(secure_ids, 1, logits, 1));
    expect_refused("logits_in_secure_ram", colibri_tz_forward(ids, 1, secure_ram, 1));
    expect_refused("logits_past_ns_ram", colibri_tz_forward(ids, 1, past_end, 1));
    expect_refused("logits_in_secure_ram_mode_0x100",
                   colibri_tz_forward(ids, 1, secure_ram, 0x100u));
    expect_refused("no_ids_in_the_weights", colibri_tz_forward(secure_ids, 0, NULL, 2));
    expect_refused("info_in_secure_ram", colibri_tz_info_get((colibri_tz_info *)secure_ram));
    expect_refused("text_in_the_weights", colibri_tz_console_write((const char *)secure_ids, 16u));
}

int main(void)
{
    colibri_tz_info info;
    console_puts("tz_app: Non-secure\n");
    info = served();
    run_prompt(info.vocab_size);
    preempted_pass();
    refused_pointers(info.vocab_size);
    console_puts("tz: refused mode_0x100");
    put_status("", colibri_tz_forward(ids, 1, logits, 0x100u));
    info = served(); /* the refused calls changed nothing: pos is the two passes' */
    console_puts("tz: reading the weights at ");
    console_put_hex32(COLIBRI_BOARD_WEIGHTS_ADDR);
    console_puts("\n");
    volatile const uint32_t *weights = (const uint32_t *)(uintptr_t)COLIBRI_BOARD_WEIGHTS_ADDR;
    uint32_t word = *weights;
    console_puts("tz: read the weights: ");
    console_put_hex32(word);
    console_puts("\n");
    return 0;
}
