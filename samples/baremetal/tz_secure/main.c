/*
 * tz_secure - the Secure image of the TrustZone-M split (docs/trustzone.md).
 * It owns the model image (the board's weight region, which the IDAU keeps
 * Secure), the engine's state and scratch and the console. Before any weight
 * is used: the image's Ed25519 signature with the key compiled in
 * (TRUSTED_KEY=...), the hash of every block it covers, colibri_init and
 * colibri_verify. Then it serves colibri_tz.h's entries and starts the
 * Non-secure application (samples/baremetal/tz_app). An image refused here
 * is never read again: every entry answers COLIBRI_TZ_E_NOT_READY.
 *
 *   make firmware-tz BOARD=qemu_an547 MODEL_DIR=out/model TRUSTED_KEY=keys/release.pub
 */
#include "board.h"
#include "board_config.h"
#include "colibri.h"
#include "colibri_trusted_key.h"
#include "console.h"
#include "model_config.h"
#include "tz_secure.h"

_Static_assert(COLIBRI_TRUSTED_KEY_PRESENT,
               "tz_secure verifies a signed image: build it with TRUSTED_KEY=<key>.pub");

static colibri_model model;
static colibri_state state;
static _Alignas(16) uint8_t kv_memory[COLIBRI_MODEL_STATE_BYTES];
static _Alignas(16) uint8_t scratch[COLIBRI_MODEL_SCRATCH_BYTES];
static int32_t call_ids[COLIBRI_MODEL_CONTEXT];
static const uint8_t trusted_key[32] = COLIBRI_TRUSTED_KEY;

/* Signature, block hashes, then the core's own checks, in that order. */
static colibri_status load_image(void)
{
    colibri_signature sig;
    colibri_options options = {COLIBRI_MODEL_FINGERPRINT, board_port()};
    colibri_status s =
        colibri_signature_check(&sig, board_weights(), board_weights_size(), trusted_key);
    if (s == COLIBRI_OK) {
        s = colibri_signature_verify_blocks(&sig, 0u, 0u, NULL);
    }
    if (s == COLIBRI_OK) {
        s = colibri_init(&model, board_weights(), (size_t)sig.image_size, &options);
    }
    if (s == COLIBRI_OK) {
        s = colibri_verify(&model, NULL);
    }
    if (s == COLIBRI_OK) {
        s = colibri_state_init(&state, &model, kv_memory, sizeof kv_memory, COLIBRI_MODEL_CONTEXT);
    }
    return s;
}

int main(void)
{
    colibri_status s;
    board_init();
    console_puts("\ntz_secure on " COLIBRI_BOARD_NAME "\n");
    s = load_image();
    console_puts("secure: image: ");
    console_puts(colibri_strerror(s));
    console_puts("\n");
    if (s == COLIBRI_OK) {
        tz_serve(&model, &state, scratch, sizeof scratch, call_ids, COLIBRI_MODEL_CONTEXT);
    }
    tz_secure_setup();
    console_puts("secure: starting the Non-secure application\n");
    tz_start_nonsecure();
    console_puts("secure: the Non-secure application returned\n");
    return 0;
}
