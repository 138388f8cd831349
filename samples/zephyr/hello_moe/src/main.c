/*
 * hello_moe - run a converted Colibri model on Zephyr.
 *
 * The model image lies at the devicetree weights region (flashed as
 * colibri_weights.hex, or loaded there by QEMU / native_sim); every buffer
 * is static and sized by the model_config.h the firmware was built with.
 * Prints the greedy tokens for CONFIG_HELLO_MOE_PROMPT and the time of the
 * prefill and of each decode step: Zephyr's cycle counter (k_cycle_get,
 * through the colibri_port) and, with CONFIG_TIMING_FUNCTIONS, the timing API.
 */
#include <zephyr/kernel.h>
#include <zephyr/sys/printk.h>
#include <zephyr/timing/timing.h>

#include "colibri.h"
#include "colibri_zephyr.h"
#include "model_config.h"
#include "prompt.h"

#define GENERATE CONFIG_HELLO_MOE_GENERATE
#define MAX_PROMPT 32

COLIBRI_ZEPHYR_CHECK_MODEL_FITS();
BUILD_ASSERT(COLIBRI_MODEL_CONTEXT >= MAX_PROMPT + GENERATE,
             "model context too small for MAX_PROMPT + CONFIG_HELLO_MOE_GENERATE");
BUILD_ASSERT(CONFIG_MAIN_STACK_SIZE >= CONFIG_COLIBRI_STACK_SIZE + 1024,
             "CONFIG_MAIN_STACK_SIZE too small for colibri_forward and printk");

static colibri_model model;
static colibri_state state;
static __aligned(16) uint8_t kv_memory[COLIBRI_MODEL_STATE_BYTES];
static __aligned(16) uint8_t scratch[COLIBRI_MODEL_SCRATCH_BYTES];
static float logits[COLIBRI_MODEL_VOCAB_SIZE];

/* Time of one step: port ticks, and timing-API cycles when enabled. */
typedef struct step_time {
    uint64_t ticks;
    uint64_t timing_ns;
} step_time;

static uint64_t ticks_to_us(uint64_t ticks)
{
    return ticks * 1000000u / colibri_zephyr_ticks_hz();
}

static void print_ids(const char *label, const int32_t *ids, int n)
{
    printk("%s:", label);
    for (int i = 0; i < n; i++) {
        printk(" %d", (int)ids[i]);
    }
    printk("\n");
}

static colibri_status init_model(void)
{
    colibri_options options = {COLIBRI_MODEL_FINGERPRINT, colibri_zephyr_port()};
    printk("weights: 0x%lx, %u of %lu bytes (%s)\n", (unsigned long)COLIBRI_ZEPHYR_WEIGHTS_ADDRESS,
           (unsigned)COLIBRI_MODEL_IMAGE_SIZE, (unsigned long)colibri_zephyr_weights_size(),
           COLIBRI_ZEPHYR_WEIGHTS_SOURCE);
    colibri_status s =
        colibri_init(&model, colibri_zephyr_weights(), colibri_zephyr_weights_size(), &options);
    if (s != COLIBRI_OK) {
        return s;
    }
    printk("colibri: init ok: arch %u, vocab %u, hidden %u, layers %u, experts %u (top %u), "
           "fingerprint 0x%08x, kernels %s\n",
           model.hp.arch, model.hp.vocab_size, model.hp.hidden_size, model.hp.n_layers,
           model.hp.n_experts, model.hp.top_k, model.fingerprint, model.kernels.name);
    uint32_t bad = 0;
    uint64_t t0 = colibri_zephyr_ticks();
    s = colibri_verify(&model, &bad);
    if (s != COLIBRI_OK) {
        printk("colibri: verify: tensor %u: ", bad);
        return s;
    }
    printk("colibri: verify ok (%llu us)\n",
           (unsigned long long)ticks_to_us(colibri_zephyr_ticks() - t0));
    return colibri_state_init(&state, &model, kv_memory, sizeof kv_memory, COLIBRI_MODEL_CONTEXT);
}

static colibri_status timed_forward(const int32_t *ids, uint32_t n, step_time *time)
{
    timing_t start = 0;
    timing_t end = 0;
    if (IS_ENABLED(CONFIG_TIMING_FUNCTIONS)) {
        start = timing_counter_get();
    }
    colibri_status s = colibri_forward(&model, &state, ids, n, logits, COLIBRI_LOGITS_LAST, scratch,
                                       sizeof scratch, &time->ticks);
    time->timing_ns = 0;
    if (IS_ENABLED(CONFIG_TIMING_FUNCTIONS)) {
        end = timing_counter_get();
        time->timing_ns = timing_cycles_to_ns(timing_cycles_get(&start, &end));
    }
    return s;
}

static void print_timing(uint32_t n_prompt, const step_time *prefill, const step_time *decode,
                         uint32_t steps)
{
    printk("timing: prefill %u ids: %llu cycles (%llu us)", n_prompt,
           (unsigned long long)prefill->ticks, (unsigned long long)ticks_to_us(prefill->ticks));
    if (steps > 0) {
        printk("; decode: %llu cycles/token (%llu us/token)",
               (unsigned long long)(decode->ticks / steps),
               (unsigned long long)ticks_to_us(decode->ticks / steps));
    }
    printk("; %llu Hz, %s\n", (unsigned long long)colibri_zephyr_ticks_hz(),
           colibri_zephyr_tick_unit());
    if (IS_ENABLED(CONFIG_TIMING_FUNCTIONS)) {
        printk("timing API: prefill %llu ns; decode %llu ns/token\n",
               (unsigned long long)prefill->timing_ns,
               (unsigned long long)(steps > 0 ? decode->timing_ns / steps : 0));
    }
}

static colibri_status generate(int32_t *ids, uint32_t n_prompt)
{
    int32_t tokens[GENERATE];
    step_time prefill = {0, 0};
    step_time decode = {0, 0};
    uint32_t n = n_prompt;
    for (int i = 0; i < GENERATE; i++) {
        step_time step;
        colibri_status s = timed_forward(ids, n, &step);
        if (s != COLIBRI_OK) {
            return s;
        }
        step_time *sum = i == 0 ? &prefill : &decode;
        sum->ticks += step.ticks;
        sum->timing_ns += step.timing_ns;
        tokens[i] = (int32_t)colibri_argmax(logits, COLIBRI_MODEL_VOCAB_SIZE);
        ids[0] = tokens[i];
        n = 1;
    }
    print_ids("tokens", tokens, GENERATE);
    print_timing(n_prompt, &prefill, &decode, GENERATE - 1);
    return COLIBRI_OK;
}

int main(void)
{
    int32_t ids[MAX_PROMPT];
    printk("colibri hello_moe on %s\n", CONFIG_BOARD_TARGET);
    int n = prompt_parse(CONFIG_HELLO_MOE_PROMPT, ids, MAX_PROMPT, COLIBRI_MODEL_VOCAB_SIZE);
    if (n < 0) {
        printk("error: CONFIG_HELLO_MOE_PROMPT \"%s\" is not 1..%d ids below %u\n",
               CONFIG_HELLO_MOE_PROMPT, MAX_PROMPT, (unsigned)COLIBRI_MODEL_VOCAB_SIZE);
        return 0;
    }
    if (IS_ENABLED(CONFIG_TIMING_FUNCTIONS)) {
        timing_init();
        timing_start();
    }
    colibri_status s = init_model();
    if (s == COLIBRI_OK) {
        print_ids("prompt", ids, n);
        s = generate(ids, (uint32_t)n);
    }
    if (s != COLIBRI_OK) {
        printk("error: %s (status %d)\n", colibri_strerror(s), (int)s);
        return 0;
    }
    printk("done\n");
    return 0;
}
