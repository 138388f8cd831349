/*
 * paged_runner - the serial protocol (docs/serial-protocol.md) on a model
 * that is not in the address map: serial_runner, with the image's start read
 * from the board's storage into RAM and the routed experts paged into the
 * core's expert cache (docs/baremetal-paging.md), so that `colibri-test run
 * --storage` checks a paging firmware as it checks the others. Under QEMU the
 * storage is the semihosting file the command line names; the words after it
 * may set `slots=N` (default: the arena compiled in, EXPERT_CACHE_SLOTS).
 *
 *   make firmware BOARD=qemu_an547 APP=paged_runner MODEL_DIR=out/paged
 *
 * If the storage or the image's start cannot be read, the runner still
 * serves: INFO then carries colibri_init's refusal of the empty image, and
 * a block that cannot be read ends a FORWARD with COLIBRI_E_EXPERT_UNAVAILABLE.
 */
#include "board.h"
#include "board_config.h"
#include "colibri_runner.h"
#include "model_config.h"

#define MAX_SLOTS                                                                                  \
    (COLIBRI_EXPERT_CACHE_SLOTS > 0 ? COLIBRI_EXPERT_CACHE_SLOTS : COLIBRI_MODEL_N_EXPERT_BLOCKS)

static colibri_runner runner;
static colibri_expert_cache cache;
static colibri_port port;
static _Alignas(64) uint8_t image_start[COLIBRI_MODEL_RESIDENT_BYTES];
static _Alignas(64) uint8_t arena[COLIBRI_MODEL_EXPERT_CACHE_BYTES(MAX_SLOTS)];
static _Alignas(16) uint8_t kv_memory[COLIBRI_MODEL_STATE_BYTES];
static _Alignas(16) uint8_t scratch[COLIBRI_MODEL_SCRATCH_BYTES];
static float logits[COLIBRI_MODEL_VOCAB_SIZE];

static int uart_read(void *ctx, uint32_t timeout_ms)
{
    (void)ctx;
    return board_uart_read(timeout_ms);
}

static void uart_write(void *ctx, const uint8_t *data, size_t n)
{
    (void)ctx;
    board_uart_write(data, n);
}

static int in_interrupt(void *ctx, void (*fn)(void *arg), void *arg, size_t *stack_used)
{
    (void)ctx;
    return board_run_in_interrupt(fn, arg, stack_used);
}

/* slots=N among the command line's settings, else MAX_SLOTS. */
static uint32_t slots_setting(void)
{
    const char *p = board_args();
    while (*p != '\0') {
        uint32_t n = 0;
        if (p[0] == 's' && p[1] == 'l' && p[2] == 'o' && p[3] == 't' && p[4] == 's' &&
            p[5] == '=') {
            for (p += 6; *p >= '0' && *p <= '9' && n < MAX_SLOTS; p++) {
                n = n * 10u + (uint32_t)(*p - '0');
            }
            return n >= 1u && n <= MAX_SLOTS ? n : MAX_SLOTS;
        }
        while (*p != '\0' && *p++ != ' ') {
        }
    }
    return MAX_SLOTS;
}

/* The image's start in RAM: its size, or 0 when storage cannot give it (the
 * runner then reports COLIBRI_E_TRUNCATED). */
static size_t read_image_start(void)
{
    if (board_storage_open() < (int64_t)COLIBRI_MODEL_IMAGE_SIZE ||
        board_storage_read(NULL, 0, image_start, sizeof image_start) != 0) {
        return 0;
    }
    return sizeof image_start;
}

int main(void)
{
    board_init();
    colibri_serial_io io = {uart_read, uart_write, in_interrupt, NULL};
    size_t start = read_image_start();
    colibri_expert_cache_config config = {board_storage_read, NULL, NULL, 0,
                                          COLIBRI_EXPERT_CACHE_VERIFY};
    port = *board_port();
    colibri_expert_cache_port(&cache, &port);
    colibri_runner_config cfg = {
        .image = image_start,
        .image_size = start,
        .expected_fingerprint = COLIBRI_MODEL_FINGERPRINT,
        .port = &port,
        .kv = kv_memory,
        .kv_size = sizeof kv_memory,
        .context = COLIBRI_MODEL_CONTEXT,
        .scratch = scratch,
        .scratch_size = sizeof scratch,
        .logits = logits,
        .logits_count = COLIBRI_MODEL_VOCAB_SIZE,
        .board_name = COLIBRI_BOARD_NAME " (experts paged)",
        .tick_unit = COLIBRI_BOARD_TICKS_UNIT,
    };
    if (colibri_runner_init(&runner, &io, &cfg) == COLIBRI_OK) {
        /* on the runner's model; a cache that is refused gives no block */
        (void)colibri_expert_cache_init(&cache, &runner.model, arena,
                                        colibri_expert_cache_size(&runner.model, slots_setting()),
                                        &config);
    }
    colibri_runner_serve(&runner);
}
