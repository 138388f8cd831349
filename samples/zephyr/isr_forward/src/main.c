/*
 * isr_forward - colibri_forward in interrupt context.
 *
 * The model is initialised at boot (SYS_INIT), before main. A periodic
 * k_timer's expiry function, which Zephyr calls from the system clock
 * interrupt, runs one greedy step per expiry: the prompt first, then one
 * token at a time. The same steps then run in thread mode on a second state,
 * and every step's token and logits are compared bit for bit.
 *
 * Nothing in colibri_forward allocates, blocks or calls the kernel; the two
 * runs use separate states, scratch and logits (colibri.h, "Threads and
 * interrupts"). CONFIG_COLIBRI_IRQ_FORWARD selects FPU_SHARING, so the
 * interrupt may use the FPU that a thread uses too.
 */
#include <string.h>

#include <zephyr/init.h>
#include <zephyr/kernel.h>
#include <zephyr/sys/crc.h>
#include <zephyr/sys/printk.h>

#include "colibri.h"
#include "colibri_zephyr.h"
#include "model_config.h"

#define STEPS 8
#define TIMER_PERIOD K_MSEC(5)

COLIBRI_ZEPHYR_CHECK_MODEL_FITS();
BUILD_ASSERT(COLIBRI_MODEL_CONTEXT >= 3 + STEPS, "model context too small");
BUILD_ASSERT(COLIBRI_MODEL_VOCAB_SIZE > 3, "the prompt uses ids 1, 2, 3");

/* One run: its own state, scratch and logits, and what each step gave. */
typedef struct run {
    colibri_state state;
    __aligned(16) uint8_t kv[COLIBRI_MODEL_STATE_BYTES];
    __aligned(16) uint8_t scratch[COLIBRI_MODEL_SCRATCH_BYTES];
    float logits[COLIBRI_MODEL_VOCAB_SIZE];
    int32_t next;          /* the token to feed next */
    uint32_t step;         /* steps done */
    colibri_status status; /* first failure, or COLIBRI_OK */
    int in_isr;            /* every step saw k_is_in_isr() */
    int32_t tokens[STEPS];
    uint32_t logits_crc[STEPS]; /* CRC-32 of each step's logits bytes */
} run;

static const int32_t prompt[] = {1, 2, 3};

static colibri_model model;
static colibri_status boot_status = COLIBRI_E_BAD_ARGUMENT;
static run isr_run;
static run thread_run;
static K_SEM_DEFINE(isr_done, 0, 1);

/* At boot, before main: the model and both states. */
static int model_init_at_boot(void)
{
    colibri_options options = {COLIBRI_MODEL_FINGERPRINT, colibri_zephyr_port()};
    boot_status =
        colibri_init(&model, colibri_zephyr_weights(), colibri_zephyr_weights_size(), &options);
    run *runs[] = {&isr_run, &thread_run};
    for (size_t i = 0; i < ARRAY_SIZE(runs) && boot_status == COLIBRI_OK; i++) {
        boot_status = colibri_state_init(&runs[i]->state, &model, runs[i]->kv, sizeof runs[i]->kv,
                                         COLIBRI_MODEL_CONTEXT);
        runs[i]->in_isr = 1;
    }
    return 0;
}

SYS_INIT(model_init_at_boot, APPLICATION, CONFIG_APPLICATION_INIT_PRIORITY);

/* One greedy step of r; returns 1 when r is finished. */
static int run_step(run *r)
{
    const int32_t *ids = r->step == 0 ? prompt : &r->next;
    uint32_t n = r->step == 0 ? ARRAY_SIZE(prompt) : 1;
    r->in_isr &= k_is_in_isr() ? 1 : 0;
    r->status = colibri_forward(&model, &r->state, ids, n, r->logits, COLIBRI_LOGITS_LAST,
                                r->scratch, sizeof r->scratch, NULL);
    if (r->status != COLIBRI_OK) {
        return 1;
    }
    r->next = (int32_t)colibri_argmax(r->logits, COLIBRI_MODEL_VOCAB_SIZE);
    r->tokens[r->step] = r->next;
    r->logits_crc[r->step] = crc32_ieee((const uint8_t *)r->logits, sizeof r->logits);
    r->step++;
    return r->step == STEPS;
}

/* The k_timer expiry function: interrupt context. */
static void step_in_interrupt(struct k_timer *timer)
{
    if (isr_run.step < STEPS && isr_run.status == COLIBRI_OK && run_step(&isr_run)) {
        k_timer_stop(timer);
        k_sem_give(&isr_done);
    }
}

static K_TIMER_DEFINE(step_timer, step_in_interrupt, NULL);

static void print_tokens(const char *label, const run *r)
{
    printk("tokens (%s):", label);
    for (uint32_t i = 0; i < r->step; i++) {
        printk(" %d", (int)r->tokens[i]);
    }
    printk("\n");
}

/* 0 if both runs gave the same tokens and bit-identical logits. */
static int compare_runs(void)
{
    for (uint32_t i = 0; i < STEPS; i++) {
        if (isr_run.tokens[i] != thread_run.tokens[i] ||
            isr_run.logits_crc[i] != thread_run.logits_crc[i]) {
            printk("MISMATCH at step %u: token %d vs %d, logits crc 0x%08x vs 0x%08x\n", i,
                   (int)isr_run.tokens[i], (int)thread_run.tokens[i], isr_run.logits_crc[i],
                   thread_run.logits_crc[i]);
            return -1;
        }
    }
    if (memcmp(isr_run.logits, thread_run.logits, sizeof isr_run.logits) != 0) {
        printk("MISMATCH: last logits differ\n");
        return -1;
    }
    return 0;
}

static int run_in_interrupt(size_t *stack_used)
{
    colibri_zephyr_irq_stack_paint();
    k_timer_start(&step_timer, TIMER_PERIOD, TIMER_PERIOD);
    if (k_sem_take(&isr_done, K_SECONDS(60)) != 0) {
        k_timer_stop(&step_timer);
        printk("error: the timer steps did not finish (step %u)\n", isr_run.step);
        return -1;
    }
    *stack_used = colibri_zephyr_irq_stack_used();
    return 0;
}

int main(void)
{
    size_t stack_used = 0;
    printk("colibri isr_forward on %s\n", CONFIG_BOARD_TARGET);
    if (boot_status != COLIBRI_OK) {
        printk("error: model init at boot: %s (status %d)\n", colibri_strerror(boot_status),
               (int)boot_status);
        return 0;
    }
    printk("colibri: init ok at boot, fingerprint 0x%08x\n", model.fingerprint);
    if (run_in_interrupt(&stack_used) != 0) {
        return 0;
    }
    printk("isr: in interrupt %d, status %d, steps %u, interrupt stack used %u of %u bytes\n",
           isr_run.in_isr, (int)isr_run.status, isr_run.step, (unsigned)stack_used,
           (unsigned)CONFIG_ISR_STACK_SIZE);
    while (!run_step(&thread_run)) {
    }
    thread_run.in_isr = 0;
    printk("thread: status %d, steps %u\n", (int)thread_run.status, thread_run.step);
    print_tokens("isr", &isr_run);
    print_tokens("thread", &thread_run);
    if (isr_run.status != COLIBRI_OK || thread_run.status != COLIBRI_OK || compare_runs() != 0) {
        printk("error: interrupt and thread runs differ\n");
        return 0;
    }
    printk("match: logits bit-identical in interrupt and thread mode\n");
    printk("done\n");
    return 0;
}
