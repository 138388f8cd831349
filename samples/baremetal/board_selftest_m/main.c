/*
 * board_selftest_m - self-test of the Cortex-M port (ports/baremetal/cortex_m)
 * on a board with a model image at its weight address.
 *
 *   make firmware BOARD=qemu_an547 APP=board_selftest_m MODEL_DIR=out/model
 *
 * Prints one line per check (tests/ports/cortex_m parse them), then
 * "SELFTEST PASS" and exits 0, or "SELFTEST FAIL <what>" and exits with:
 *   2 no image at the weight address, 3 colibri_init or colibri_verify
 *   failed, 4 forward failed, 5 logits differ between the runs, 6 the
 *   weights can be written (the MPU does not protect them).
 *
 * Runs: the prompt in thread mode (logits of every position printed in hex,
 * for the comparison with colibri-run on x86-64); the same prompt from the
 * SysTick-triggered interrupt (board_run_in_interrupt) with the handler
 * stack measured; then both at once: thread-mode code in the middle of a
 * forward pass is preempted by a forward pass in the interrupt handler,
 * which proves the lazy FP stacking keeps both floating-point contexts.
 * Then greedy decoding in thread mode, timed in ticks per token, and a write
 * to the weights, which the MPU must refuse.
 */
#include "board.h"
#include "board_config.h"
#include "colibri.h"
#include "console.h"
#include "cortex_m.h"
#include "model_config.h"

#define N_IDS 8u
#define N_GEN 8u
#define ROW_FLOATS COLIBRI_MODEL_VOCAB_SIZE

_Static_assert(N_IDS + N_GEN <= COLIBRI_MODEL_CONTEXT, "prompt + decode exceed the context");

typedef struct run_buffers {
    colibri_state state;
    _Alignas(16) uint8_t kv[COLIBRI_MODEL_STATE_BYTES];
    _Alignas(16) uint8_t scratch[COLIBRI_MODEL_SCRATCH_BYTES];
    float logits[N_IDS * ROW_FLOATS];
    colibri_status status;
    uint64_t started_at; /* board_ticks() when the run began */
    uint64_t ticks;      /* colibri_forward's own count */
} run_buffers;

static colibri_model model;
static run_buffers thread_run, interrupt_run;
static float reference[N_IDS * ROW_FLOATS];
static int32_t ids[N_IDS];

static void put_line(const char *key, const char *text)
{
    console_puts(key);
    console_puts(text);
    console_puts("\n");
}

static void put_u64(const char *name, uint64_t value)
{
    console_puts(name);
    console_put_u64(value);
}

static void fail(const char *what, int status)
{
    put_line("SELFTEST FAIL ", what);
    board_exit(status);
}

static void forward_with(run_buffers *run)
{
    run->started_at = board_ticks();
    run->status =
        colibri_state_init(&run->state, &model, run->kv, sizeof run->kv, COLIBRI_MODEL_CONTEXT);
    if (run->status == COLIBRI_OK) {
        run->status =
            colibri_forward(&model, &run->state, ids, N_IDS, run->logits, COLIBRI_LOGITS_ALL,
                            run->scratch, sizeof run->scratch, &run->ticks);
    }
}

static void forward_in_interrupt(void *arg)
{
    forward_with((run_buffers *)arg);
}

/* Bitwise equality: tells -0.0 from 0.0 and compares NaN payloads. */
static int same_bits(const float *a, const float *b, size_t n)
{
    const uint8_t *pa = (const uint8_t *)a, *pb = (const uint8_t *)b;
    uint8_t diff = 0;
    for (size_t i = 0; i < n * sizeof(float); i++) {
        diff |= (uint8_t)(pa[i] ^ pb[i]);
    }
    return diff == 0;
}

static void check_ticks(void)
{
    uint64_t before = board_ticks();
    volatile uint32_t spin = 0;
    while (spin < 20000u) {
        spin = spin + 1u;
    }
    uint64_t after = board_ticks();
    put_u64("ticks: hz=", COLIBRI_BOARD_TICKS_HZ);
    put_u64(" spin_ticks=", after - before);
    put_u64(" millis=", board_millis());
    put_line(" unit=", COLIBRI_BOARD_TICKS_UNIT);
    if (after <= before) {
        fail("ticks do not advance", 1);
    }
}

static void check_image(void)
{
    static const uint8_t magic[8] = {'C', 'O', 'L', 'I', 'B', 'R', 'I', 0x1A};
    const uint8_t *image = board_weights();
    int found = board_weights_size() >= sizeof magic;
    for (size_t i = 0; found && i < sizeof magic; i++) {
        found = image[i] == magic[i];
    }
    console_puts("image: addr=");
    console_put_hex32((uint32_t)(uintptr_t)image);
    put_u64(" region_bytes=", board_weights_size());
    put_line(" found=", found ? "yes" : "no");
    if (!found) {
        fail("no model image at the weight address", 2);
    }
}

static void init_model(void)
{
    colibri_options options = {COLIBRI_MODEL_FINGERPRINT, board_port()};
    colibri_status s = colibri_init(&model, board_weights(), board_weights_size(), &options);
    put_line("init: ", colibri_strerror(s));
    if (s != COLIBRI_OK) {
        fail("colibri_init", 3);
    }
    uint32_t bad_tensor = 0;
    uint64_t start = board_ticks();
    s = colibri_verify(&model, &bad_tensor);
    console_puts("verify: ");
    console_puts(s == COLIBRI_OK ? "ok" : "FAILED");
    put_u64(" status=", (uint64_t)s);
    put_u64(" bad_tensor=", s == COLIBRI_OK ? 0u : bad_tensor);
    put_u64(" ticks=", board_ticks() - start);
    put_u64(" image_bytes=", model.image_size);
    console_puts("\n");
    if (s != COLIBRI_OK) {
        fail("colibri_verify", 3);
    }
}

static void print_logits(const float *logits)
{
    for (uint32_t row = 0; row < N_IDS; row++) {
        put_u64("logits ", row);
        for (uint32_t i = 0; i < ROW_FLOATS; i++) {
            uint32_t bits;
            __builtin_memcpy(&bits, &logits[row * ROW_FLOATS + i], sizeof bits);
            console_puts(" ");
            console_put_hex32(bits);
        }
        console_puts("\n");
    }
}

static void thread_pass(void)
{
    forward_with(&thread_run);
    if (thread_run.status != COLIBRI_OK) {
        put_line("thread: ", colibri_strerror(thread_run.status));
        fail("forward in thread mode", 4);
    }
    __builtin_memcpy(reference, thread_run.logits, sizeof reference);
    put_u64("thread: ok prompt_tokens=", N_IDS);
    put_u64(" prompt_ticks=", thread_run.ticks);
    console_puts("\n");
    print_logits(reference);
}

static void interrupt_pass(void)
{
    size_t stack_used = 0;
    interrupt_run.status = COLIBRI_E_BAD_ARGUMENT;
    if (board_run_in_interrupt(forward_in_interrupt, &interrupt_run, &stack_used) != 0) {
        fail("board_run_in_interrupt", 4);
    }
    int equal = interrupt_run.status == COLIBRI_OK &&
                same_bits(interrupt_run.logits, reference, N_IDS * ROW_FLOATS);
    console_puts("isr: status=");
    console_puts(colibri_strerror(interrupt_run.status));
    console_puts(" equal=");
    console_puts(equal ? "yes" : "no");
    put_u64(" stack_bytes=", stack_used);
    put_u64(" handler_stack_size=", cm_handler_stack_size());
    put_u64(" ticks=", interrupt_run.ticks);
    console_puts("\n");
    if (!equal) {
        fail("interrupt logits differ from thread logits", 5);
    }
}

/* The interrupt forward pass lands in the middle of the thread's. */
static void preempt_pass(void)
{
    interrupt_run.status = COLIBRI_E_BAD_ARGUMENT;
    if (cm_job_start(forward_in_interrupt, &interrupt_run) != 0) {
        fail("cm_job_start", 4);
    }
    forward_with(&thread_run);
    uint64_t thread_end = board_ticks();
    cm_job_wait();
    int inside =
        interrupt_run.started_at > thread_run.started_at && interrupt_run.started_at < thread_end;
    int thread_equal = thread_run.status == COLIBRI_OK &&
                       same_bits(thread_run.logits, reference, N_IDS * ROW_FLOATS);
    int interrupt_equal = interrupt_run.status == COLIBRI_OK &&
                          same_bits(interrupt_run.logits, reference, N_IDS * ROW_FLOATS);
    console_puts("preempt: inside=");
    console_puts(inside ? "yes" : "no");
    console_puts(" thread_equal=");
    console_puts(thread_equal ? "yes" : "no");
    console_puts(" isr_equal=");
    console_puts(interrupt_equal ? "yes" : "no");
    console_puts("\n");
    if (!thread_equal || !interrupt_equal) {
        fail("logits changed when a forward pass was interrupted by another", 5);
    }
}

static void decode_pass(void)
{
    uint64_t total = 0;
    int32_t next = (int32_t)colibri_argmax(&reference[(N_IDS - 1u) * ROW_FLOATS], ROW_FLOATS);
    colibri_state *state = &thread_run.state;
    colibri_status s = colibri_state_init(state, &model, thread_run.kv, sizeof thread_run.kv,
                                          COLIBRI_MODEL_CONTEXT);
    if (s == COLIBRI_OK) {
        s = colibri_forward(&model, state, ids, N_IDS, NULL, COLIBRI_LOGITS_NONE,
                            thread_run.scratch, sizeof thread_run.scratch, NULL);
    }
    console_puts("gen:");
    for (uint32_t i = 0; s == COLIBRI_OK && i < N_GEN; i++) {
        put_u64(" ", (uint64_t)next);
        uint64_t step = 0;
        s = colibri_forward(&model, state, &next, 1, thread_run.logits, COLIBRI_LOGITS_LAST,
                            thread_run.scratch, sizeof thread_run.scratch, &step);
        total += step;
        next = (int32_t)colibri_argmax(thread_run.logits, ROW_FLOATS);
    }
    console_puts("\n");
    if (s != COLIBRI_OK) {
        fail("decode", 4);
    }
    put_u64("decode: tokens=", N_GEN);
    put_u64(" ticks_per_token=", total / N_GEN);
    console_puts("\n");
}

static void check_weights_read_only(void)
{
    volatile uint32_t *first_word = (volatile uint32_t *)(uintptr_t)board_weights();
    int protected = cm_write_faults(first_word);
    put_line("mpu: weights_read_only=", protected ? "yes" : "no");
    if (!protected) {
        fail("the weight region is writable", 6);
    }
}

int main(void)
{
    board_init();
    put_line("\nselftest-m board=", COLIBRI_BOARD_NAME);
    check_ticks();
    check_image();
    init_model();
    for (uint32_t i = 0; i < N_IDS; i++) {
        ids[i] = (int32_t)((7u * i + 3u) % COLIBRI_MODEL_VOCAB_SIZE);
    }
    thread_pass();
    interrupt_pass();
    preempt_pass();
    decode_pass();
    check_weights_read_only();
    put_u64("stacks: thread_used=", cm_thread_stack_used());
    put_u64(" thread_size=", cm_thread_stack_size());
    put_u64(" handler_used=", cm_handler_stack_used());
    put_u64(" handler_size=", cm_handler_stack_size());
    console_puts("\nSELFTEST PASS\n");
    board_exit(0);
}
