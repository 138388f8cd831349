/*
 * serial_runner - serve the Colibri serial protocol (docs/serial-protocol.md)
 * on a Zephyr UART (chosen "colibri,uart", else the console UART), on the
 * model image at the devicetree weights region. The runner is the bare-metal
 * port's (ports/serial), unchanged; colibri_zephyr_serial_io() is its UART.
 * The host side is `colibri-test`; a human can type `help`.
 *
 *   west build -b mps3/corstone300/an547 samples/zephyr/serial_runner -- \
 *       -DCOLIBRI_MODEL_DIR=<dir with model_config.h and model.bin>
 *
 * With CONFIG_COLIBRI_SLOTS (boards/<board>_slots.conf, -DFILE_SUFFIX=slots)
 * the model comes from A/B weight slots in a flash partition instead
 * (docs/ota.md): boot picks the newest slot that verifies, a new image must
 * pass its first run to be confirmed, and SLOT_* requests
 * (colibri-flash --slot auto) write updates into the other slot.
 */
#include <zephyr/kernel.h>

#include "colibri_runner.h"
#include "colibri_zephyr.h"
#include "colibri_zephyr_serial.h"
#include "model_config.h"

COLIBRI_ZEPHYR_CHECK_MODEL_FITS();
BUILD_ASSERT(CONFIG_MAIN_STACK_SIZE >= CONFIG_COLIBRI_STACK_SIZE + 1024,
             "CONFIG_MAIN_STACK_SIZE too small for the runner and colibri_forward");

static colibri_runner runner;
static __aligned(16) uint8_t kv_memory[COLIBRI_MODEL_STATE_BYTES];
static __aligned(16) uint8_t scratch[COLIBRI_MODEL_SCRATCH_BYTES];
static float logits[COLIBRI_MODEL_VOCAB_SIZE];

int main(void)
{
    colibri_serial_io io;
    if (colibri_zephyr_serial_io(&io) != 0) {
        return 0; /* no UART: nothing to serve on */
    }
    colibri_runner_config cfg = {
        .image = colibri_zephyr_weights(),
        .image_size = colibri_zephyr_weights_size(),
        .expected_fingerprint = COLIBRI_MODEL_FINGERPRINT,
        .port = colibri_zephyr_port(),
        .kv = kv_memory,
        .kv_size = sizeof kv_memory,
        .context = COLIBRI_MODEL_CONTEXT,
        .scratch = scratch,
        .scratch_size = sizeof scratch,
        .logits = logits,
        .logits_count = COLIBRI_MODEL_VOCAB_SIZE,
        .board_name = CONFIG_BOARD_TARGET " (Zephyr)",
        .tick_unit = colibri_zephyr_tick_unit(),
    };
    if (IS_ENABLED(CONFIG_COLIBRI_SLOTS)) {
        const colibri_slots *slots = colibri_zephyr_slots(colibri_zephyr_trusted_key());
        if (slots != NULL) {
            cfg.expected_fingerprint = 0; /* an update brings a new fingerprint */
            (void)colibri_runner_boot_slots(&runner, &io, &cfg, slots);
            colibri_runner_serve(&runner);
        }
        static const char unusable[] = "ota: the slots partition is not usable (too small, "
                                       "misaligned, or its flash not ready): docs/zephyr.md "
                                       "section 8\r\n";
        io.write(io.ctx, (const uint8_t *)unusable, sizeof unusable - 1);
        cfg.image_size = 0; /* a slots build has nothing at the weights address */
    }
    (void)colibri_runner_init(&runner, &io, &cfg); /* serves even if the image is bad */
    colibri_runner_serve(&runner);
}
