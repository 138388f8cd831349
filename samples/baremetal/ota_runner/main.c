/*
 * ota_runner - the serial runner on A/B weight slots (docs/ota.md): boot
 * picks the newest slot that verifies (signature, block hashes, CRCs), a new
 * image must pass its first run (one forward pass with finite logits) to be
 * confirmed, else it is marked bad and the other slot comes back; then the
 * serial protocol serves the model and takes updates into the slot that is
 * not running (SLOT_* requests; colibri-flash --slot auto sends them).
 *
 *   make firmware BOARD=qemu_virt_a72 APP=ota_runner MODEL_DIR=out/model \
 *       TRUSTED_KEY=keys/release.pub
 *
 * Without TRUSTED_KEY unsigned images are accepted too (development only).
 * The fingerprint is not pinned: an update brings new weights, and with them
 * a new fingerprint; the model's shape must fit the buffers of MODEL_DIR.
 */
#include <string.h>

#include "board.h"
#include "board_config.h"
#include "colibri_runner.h"
#include "colibri_trusted_key.h"
#include "model_config.h"

static colibri_runner runner;
static _Alignas(16) uint8_t kv_memory[COLIBRI_MODEL_STATE_BYTES];
static _Alignas(16) uint8_t scratch[COLIBRI_MODEL_SCRATCH_BYTES];
static float logits[COLIBRI_MODEL_VOCAB_SIZE];
static const uint8_t trusted_key[32] = COLIBRI_TRUSTED_KEY;

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

static void say(const char *text)
{
    board_uart_write((const uint8_t *)text, strlen(text));
}

int main(void)
{
    board_init();
    const colibri_slots *slots = board_slots(COLIBRI_TRUSTED_KEY_PRESENT ? trusted_key : NULL);
    colibri_serial_io io = {uart_read, uart_write, NULL, NULL};
    colibri_runner_config cfg = {
        .expected_fingerprint = 0,
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
    if (slots == NULL) {
        say("ota: this board has no A/B weight slots (board file [slots]) or no flash driver\r\n");
        board_exit(1);
    }
    (void)colibri_runner_boot_slots(&runner, &io, &cfg, slots);
    colibri_runner_serve(&runner);
}
