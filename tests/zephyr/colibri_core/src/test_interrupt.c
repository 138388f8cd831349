/*
 * test_interrupt.c - colibri_forward in interrupt context (a k_timer expiry,
 * through colibri_zephyr_run_in_interrupt) gives the same bits as in thread
 * mode, and the port's tick source is monotonic.
 */
#include <string.h>

#include <zephyr/kernel.h>
#include <zephyr/ztest.h>

#include "colibri_test.h"
#include "colibri_zephyr.h"

static test_run isr_run;
static test_run thread_run;

typedef struct isr_job {
    test_run *run;
    colibri_status status;
    bool in_isr;
} isr_job;

static colibri_status prompt_forward(test_run *r)
{
    return colibri_forward(&test_model, &r->state, golden_prompt, GOLDEN_N_PROMPT, r->logits,
                           COLIBRI_LOGITS_LAST, r->scratch, sizeof r->scratch, NULL);
}

static void forward_job(void *arg)
{
    isr_job *job = arg;
    job->in_isr = k_is_in_isr();
    job->status = prompt_forward(job->run);
}

ZTEST(colibri, test_forward_in_interrupt_matches_thread_mode)
{
    isr_job job = {&isr_run, COLIBRI_E_BAD_ARGUMENT, false};
    size_t stack_used = 0;
    test_run_reset(&isr_run);
    test_run_reset(&thread_run);
    zassert_ok(colibri_zephyr_run_in_interrupt(forward_job, &job, &stack_used));
    zassert_true(job.in_isr, "the job did not run in interrupt context");
    zassert_ok(job.status, "%s", colibri_strerror(job.status));
    zassert_ok(prompt_forward(&thread_run));
    zassert_mem_equal(isr_run.logits, thread_run.logits, COLIBRI_MODEL_VOCAB_SIZE * sizeof(float));
    TC_PRINT("interrupt stack used: %u of %u bytes\n", (unsigned)stack_used,
             (unsigned)CONFIG_ISR_STACK_SIZE);
    if (IS_ENABLED(CONFIG_COLIBRI_IRQ_STACK_MEASURE)) {
        zassert_true(stack_used > 0 && stack_used < CONFIG_ISR_STACK_SIZE);
    }
}

ZTEST(colibri, test_run_in_interrupt_refuses_no_function)
{
    zassert_equal(colibri_zephyr_run_in_interrupt(NULL, NULL, NULL), -1);
}

ZTEST(colibri, test_ticks_are_monotonic)
{
    uint64_t ticks = 0;
    uint64_t before = colibri_zephyr_ticks();
    test_run_reset(&thread_run);
    zassert_ok(colibri_forward(&test_model, &thread_run.state, golden_prompt, GOLDEN_N_PROMPT,
                               thread_run.logits, COLIBRI_LOGITS_LAST, thread_run.scratch,
                               sizeof thread_run.scratch, &ticks));
    uint64_t after = colibri_zephyr_ticks();
    zassert_true(after >= before);
    zassert_true(ticks <= after - before, "forward ticks %llu > %llu elapsed",
                 (unsigned long long)ticks, (unsigned long long)(after - before));
    zassert_true(colibri_zephyr_ticks_hz() > 0);
}
