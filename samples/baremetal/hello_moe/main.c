/*
 * hello_moe - boot, check the model image in flash at the board's weight
 * address, and generate text from a prompt on the console: the demo.
 *
 * Needs in MODEL_DIR, beside model_config.h:
 *   model_vocab.h   token strings    (colibri-vocab model_tokenizer.json)
 *   model_prompt.h  COLIBRI_DEMO_PROMPT_IDS {..}, COLIBRI_DEMO_PROMPT_TEXT,
 *                   COLIBRI_DEMO_GENERATE  (written by the demo script)
 */
#include "board.h"
#include "board_config.h"
#include "colibri.h"
#include "console.h"
#include "model_config.h"
#include "model_prompt.h"
#include "model_vocab.h"

static colibri_model model;
static colibri_state state;
static _Alignas(16) uint8_t kv_memory[COLIBRI_MODEL_STATE_BYTES];
static _Alignas(16) uint8_t scratch[COLIBRI_MODEL_SCRATCH_BYTES];
static float logits[COLIBRI_MODEL_VOCAB_SIZE];
static const int32_t prompt[] = COLIBRI_DEMO_PROMPT_IDS;

#define PROMPT_LEN ((uint32_t)(sizeof prompt / sizeof prompt[0]))
_Static_assert(PROMPT_LEN + COLIBRI_DEMO_GENERATE <= COLIBRI_MODEL_CONTEXT,
               "prompt + generated tokens exceed the model context");

static void fail(const char *what, colibri_status status)
{
    console_puts("hello_moe: ");
    console_puts(what);
    console_puts(": ");
    console_puts(colibri_strerror(status));
    console_puts("\n");
    board_exit(1);
}

static void put_token(int32_t id)
{
    if (id >= 0 && (uint32_t)id < COLIBRI_VOCAB_SIZE) {
        console_put_text(colibri_vocab[id], colibri_vocab_len[id]);
    } else {
        console_puts("?");
    }
}

static void check_image(void)
{
    colibri_options options = {COLIBRI_MODEL_FINGERPRINT, board_port()};
    uint64_t start;
    colibri_status s = colibri_init(&model, board_weights(), board_weights_size(), &options);
    if (s != COLIBRI_OK) {
        fail("model image", s);
    }
    start = board_ticks();
    s = colibri_verify(&model, NULL);
    if (s != COLIBRI_OK) {
        fail("verify", s);
    }
    console_puts("model ");
    console_put_hex32(model.fingerprint);
    console_puts(" at ");
    console_put_hex32((uint32_t)(uintptr_t)board_weights());
    console_puts(": ");
    console_put_u64(model.image_size);
    console_puts(" bytes verified in ");
    console_put_u64(board_ticks() - start);
    console_puts(" ticks\n");
}

static void generate(void)
{
    uint64_t prompt_ticks = 0, step_ticks = 0, total = 0;
    int32_t next;
    colibri_status s =
        colibri_state_init(&state, &model, kv_memory, sizeof kv_memory, COLIBRI_MODEL_CONTEXT);
    if (s == COLIBRI_OK) {
        s = colibri_forward(&model, &state, prompt, PROMPT_LEN, logits, COLIBRI_LOGITS_LAST,
                            scratch, sizeof scratch, &prompt_ticks);
    }
    console_puts(COLIBRI_DEMO_PROMPT_TEXT);
    for (uint32_t i = 0; s == COLIBRI_OK && i < COLIBRI_DEMO_GENERATE; i++) {
        next = (int32_t)colibri_argmax(logits, COLIBRI_MODEL_VOCAB_SIZE);
        put_token(next);
        if (i + 1u < COLIBRI_DEMO_GENERATE) {
            s = colibri_forward(&model, &state, &next, 1, logits, COLIBRI_LOGITS_LAST, scratch,
                                sizeof scratch, &step_ticks);
            total += step_ticks;
        }
    }
    if (s != COLIBRI_OK) {
        fail("forward", s);
    }
    console_puts("\n--\nprompt ");
    console_put_u64(PROMPT_LEN);
    console_puts(" tokens: ");
    console_put_u64(prompt_ticks);
    console_puts(" ticks; ");
    console_put_u64(COLIBRI_DEMO_GENERATE - 1u);
    console_puts(" decode steps: ");
    console_put_u64(total / (COLIBRI_DEMO_GENERATE > 1 ? COLIBRI_DEMO_GENERATE - 1u : 1u));
    console_puts(" ticks/token (tick = " COLIBRI_BOARD_TICKS_UNIT ")\n");
}

int main(void)
{
    board_init();
    console_puts("\nhello_moe on " COLIBRI_BOARD_NAME "\n");
    check_image();
    generate();
    board_exit(0);
}
