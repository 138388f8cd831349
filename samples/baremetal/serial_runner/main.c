/*
 * serial_runner - serve the Colibri serial protocol (docs/serial-protocol.md)
 * on the board's console UART, on the model image at the board's weight
 * address. The host side is `colibri-test`; a human can type `help`.
 *
 *   make firmware BOARD=qemu_virt_a72 APP=serial_runner MODEL_DIR=out/model
 */
#include "board.h"
#include "board_config.h"
#include "colibri_runner.h"
#include "model_config.h"

static colibri_runner runner;
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

int main(void)
{
    board_init();
    colibri_serial_io io = {uart_read, uart_write, in_interrupt, NULL};
    colibri_runner_config cfg = {
        .image = board_weights(),
        .image_size = board_weights_size(),
        .expected_fingerprint = COLIBRI_MODEL_FINGERPRINT,
        .port = board_port(),
        .kv = kv_memory,
        .kv_size = sizeof kv_memory,
        .context = COLIBRI_MODEL_CONTEXT,
        .scratch = scratch,
        .scratch_size = sizeof scratch,
        .logits = logits,
        .logits_count = COLIBRI_MODEL_VOCAB_SIZE,
        .board_name = COLIBRI_BOARD_NAME,
        .tick_unit = COLIBRI_BOARD_TICKS_UNIT,
    };
    (void)colibri_runner_init(&runner, &io, &cfg); /* serves even if the image is bad */
    colibri_runner_serve(&runner);
}
