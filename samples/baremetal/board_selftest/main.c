/*
 * board_selftest - checks a bare-metal board port end to end, on the board
 * or under its emulator, and says so on the UART, one "key: value" line per
 * check (tests/ports/aarch64 parses them):
 *
 *   selftest: board <name>                 the board file's name
 *   port: <text>                           board_description(), if the port has it
 *   ticks: <delta> unit <unit>             board_ticks() advances
 *   millis: <ms>                           board_millis() since board_init
 *   weights: <addr> size <n> magic <hex> <hex>   first 8 bytes of the weight region
 *   init: status <s> fingerprint <hex>     colibri_init with model_config.h's fingerprint
 *   verify: status <s> tensor <i>          colibri_verify (every tensor's CRC)
 *   thread: status <s> ticks <t> tokens <n>   prompt forward from thread mode
 *   logits: <hex> <hex> ...                its last-position logits, as float bits
 *   isr: status <s> stack_used <bytes>     the same forward inside a timer interrupt
 *   isr_logits: match | mismatch at <i>    bit-for-bit comparison of the two
 *   generate: <id> <id> ...                greedy tokens (the first from the prompt)
 *   decode_ticks: <t> <t> ...              ticks of each one-token forward
 *   uart_rx: none | <byte>                 board_uart_read with a 20 ms timeout;
 *                                          'w' then writes to the weight region,
 *                                          which must fault (read-only mapping)
 *   selftest: PASS | FAIL <what>
 *
 * The program exits (board_exit: semihosting under QEMU) with 0 on PASS, 1 on
 * FAIL. The model is the one model_config.h describes, at the board's weight
 * address; the prompt is fixed: ids (1 + 3 i) mod vocab_size, i < PROMPT_LEN.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "board.h"
#include "board_config.h"
#include "colibri.h"
#include "console.h"
#include "model_config.h"

#define PROMPT_LEN 8u
#define GEN_TOKENS 8u
#define UART_WAIT_MS 20u
#define EXIT_PASS 0
#define EXIT_FAIL 1

_Static_assert(PROMPT_LEN + GEN_TOKENS - 1u <= COLIBRI_MODEL_CONTEXT,
               "prompt and generated tokens must fit the model's context");

/* Optional port hook (aarch64: "aarch64 EL1 (entered at EL2), ..."). */
const char *board_description(void) __attribute__((weak));

typedef struct run_buffers {
    colibri_state state;
    _Alignas(16) uint8_t kv[COLIBRI_MODEL_STATE_BYTES];
    _Alignas(16) uint8_t scratch[COLIBRI_MODEL_SCRATCH_BYTES];
    float logits[COLIBRI_MODEL_VOCAB_SIZE];
    colibri_status status;
    uint64_t ticks;
} run_buffers;

static colibri_model model;
static run_buffers thread_run, isr_run;
static int32_t prompt[PROMPT_LEN];

static void report_status(const char *key, colibri_status status)
{
    console_puts(key);
    console_puts(": status ");
    console_put_u64((uint64_t)status);
    console_puts(" (");
    console_puts(colibri_strerror(status));
    console_puts(")");
}

static int fail(const char *what)
{
    console_puts("selftest: FAIL ");
    console_puts(what);
    console_puts("\n");
    return EXIT_FAIL;
}

static int check_ticks(void)
{
    uint64_t before = board_ticks();
    volatile uint32_t spin = 0;
    for (uint32_t i = 0; i < 1000u; i++) {
        spin += i;
    }
    uint64_t delta = board_ticks() - before;
    console_puts("ticks: ");
    console_put_u64(delta);
    console_puts(" unit " COLIBRI_BOARD_TICKS_UNIT);
    console_puts("\n");
    console_puts("millis: ");
    console_put_u64(board_millis());
    console_puts("\n");
    return delta > 0 ? EXIT_PASS : fail("ticks do not advance");
}

static int check_weights(void)
{
    static const uint8_t magic[8] = {0x43, 0x4F, 0x4C, 0x49, 0x42, 0x52, 0x49, 0x1A};
    const uint8_t *w = board_weights();
    console_puts("weights: ");
    console_put_hex32((uint32_t)(uintptr_t)w);
    console_puts(" size ");
    console_put_u64(board_weights_size());
    console_puts(" magic");
    for (unsigned i = 0; i < sizeof magic; i += 4) {
        console_puts(" ");
        console_put_hex32((uint32_t)w[i] << 24 | (uint32_t)w[i + 1] << 16 |
                          (uint32_t)w[i + 2] << 8 | w[i + 3]);
    }
    console_puts("\n");
    if (memcmp(w, magic, sizeof magic) != 0) {
        return fail("no model image at the weight address");
    }
    return EXIT_PASS;
}

static int check_image(void)
{
    colibri_options options = {COLIBRI_MODEL_FINGERPRINT, board_port()};
    colibri_status status =
        colibri_init(&model, board_weights(), COLIBRI_MODEL_IMAGE_SIZE, &options);
    report_status("init", status);
    console_puts(" fingerprint ");
    console_put_hex32(COLIBRI_MODEL_FINGERPRINT);
    console_puts("\n");
    if (status != COLIBRI_OK) {
        return fail("colibri_init");
    }
    uint32_t bad = 0;
    status = colibri_verify(&model, &bad);
    report_status("verify", status);
    console_puts(" tensor ");
    console_put_u64(status == COLIBRI_OK ? 0u : bad);
    console_puts("\n");
    return status == COLIBRI_OK ? EXIT_PASS : fail("colibri_verify");
}

static void run_prompt(run_buffers *run)
{
    run->status =
        colibri_state_init(&run->state, &model, run->kv, sizeof run->kv, COLIBRI_MODEL_CONTEXT);
    if (run->status == COLIBRI_OK) {
        run->status =
            colibri_forward(&model, &run->state, prompt, PROMPT_LEN, run->logits,
                            COLIBRI_LOGITS_LAST, run->scratch, sizeof run->scratch, &run->ticks);
    }
}

static void run_prompt_job(void *arg)
{
    run_prompt((run_buffers *)arg);
}

static void print_logits(const float *logits)
{
    console_puts("logits:");
    for (uint32_t i = 0; i < COLIBRI_MODEL_VOCAB_SIZE; i++) {
        uint32_t bits;
        memcpy(&bits, &logits[i], sizeof bits);
        console_puts(" ");
        console_put_hex32(bits);
    }
    console_puts("\n");
}

static int check_thread_forward(void)
{
    run_prompt(&thread_run);
    report_status("thread", thread_run.status);
    console_puts(" ticks ");
    console_put_u64(thread_run.ticks);
    console_puts(" tokens ");
    console_put_u64(PROMPT_LEN);
    console_puts("\n");
    if (thread_run.status != COLIBRI_OK) {
        return fail("forward from thread mode");
    }
    print_logits(thread_run.logits);
    return EXIT_PASS;
}

static int check_isr_forward(void)
{
    size_t stack_used = 0;
    isr_run.status = COLIBRI_E_BAD_ARGUMENT; /* stays so if the job never runs */
    if (board_run_in_interrupt(run_prompt_job, &isr_run, &stack_used) != 0) {
        return fail("board_run_in_interrupt: no timer interrupt");
    }
    report_status("isr", isr_run.status);
    console_puts(" stack_used ");
    console_put_u64(stack_used);
    console_puts("\n");
    if (isr_run.status != COLIBRI_OK) {
        return fail("forward from the interrupt handler");
    }
    console_puts("isr_logits: ");
    for (uint32_t i = 0; i < COLIBRI_MODEL_VOCAB_SIZE; i++) {
        if (memcmp(&isr_run.logits[i], &thread_run.logits[i], sizeof(float)) != 0) {
            console_puts("mismatch at ");
            console_put_u64(i);
            console_puts("\n");
            return fail("interrupt and thread logits differ");
        }
    }
    console_puts("match");
    console_puts("\n");
    return EXIT_PASS;
}

/* Greedy decoding on the thread state, like colibri-run --gen GEN_TOKENS. */
static int check_generate(void)
{
    int32_t generated[GEN_TOKENS];
    uint64_t ticks[GEN_TOKENS - 1u];
    generated[0] = (int32_t)colibri_argmax(thread_run.logits, COLIBRI_MODEL_VOCAB_SIZE);
    for (uint32_t g = 1; g < GEN_TOKENS; g++) {
        colibri_status status = colibri_forward(
            &model, &thread_run.state, &generated[g - 1u], 1u, thread_run.logits,
            COLIBRI_LOGITS_LAST, thread_run.scratch, sizeof thread_run.scratch, &ticks[g - 1u]);
        if (status != COLIBRI_OK) {
            report_status("decode", status);
            console_puts("\n");
            return fail("decode step");
        }
        generated[g] = (int32_t)colibri_argmax(thread_run.logits, COLIBRI_MODEL_VOCAB_SIZE);
    }
    console_puts("generate:");
    for (uint32_t g = 0; g < GEN_TOKENS; g++) {
        console_puts(" ");
        console_put_u64((uint64_t)generated[g]);
    }
    console_puts("\n");
    console_puts("decode_ticks:");
    for (uint32_t g = 0; g + 1u < GEN_TOKENS; g++) {
        console_puts(" ");
        console_put_u64(ticks[g]);
    }
    console_puts("\n");
    return EXIT_PASS;
}

/* The board's fault handler ends the program on the write; reaching the
 * line after it means the weights are writable. */
static int check_uart_input(void)
{
    int byte = board_uart_read(UART_WAIT_MS);
    console_puts("uart_rx: ");
    if (byte < 0) {
        console_puts("none\n");
        return EXIT_PASS;
    }
    console_put_u64((uint64_t)byte);
    console_puts("\n");
    if (byte == 'w') {
        console_puts("weights: writing one byte (expect a fault)\n");
        *(volatile uint8_t *)(uintptr_t)board_weights() = 0;
        return fail("the weight region is writable");
    }
    return EXIT_PASS;
}

int main(void)
{
    board_init();
    console_puts("selftest: board " COLIBRI_BOARD_NAME);
    console_puts("\n");
    if (board_description) {
        console_puts("port: ");
        console_puts(board_description());
        console_puts("\n");
    }
    for (uint32_t i = 0; i < PROMPT_LEN; i++) {
        prompt[i] = (int32_t)((1u + 3u * i) % COLIBRI_MODEL_VOCAB_SIZE);
    }
    int (*const checks[])(void) = {check_ticks,          check_weights,     check_image,
                                   check_thread_forward, check_isr_forward, check_generate,
                                   check_uart_input};
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
        if (checks[i]() != EXIT_PASS) {
            return EXIT_FAIL;
        }
    }
    console_puts("selftest: PASS");
    console_puts("\n");
    return EXIT_PASS;
}
