/*
 * irq_job.c - run a function in interrupt context: board_run_in_interrupt.
 *
 * The timer is SysTick: the first SysTick after cm_job_start pends PendSV,
 * and PendSV_Handler runs the job. PendSV has the lowest priority, SysTick
 * the highest, so the millisecond count keeps running while a long job (a
 * whole colibri_forward) executes, and the job preempts thread code at an
 * arbitrary instruction, float code included.
 *
 * Floating point: the handler is plain C and uses the FPU. With FPCCR.ASPEN
 * and LSPEN set (startup.S), an interrupted thread whose CONTROL.FPCA is set
 * gets an extended frame: the hardware reserves room for S0-S15 and FPSCR
 * (and VPR on the M55), and stores them on the handler's first FP
 * instruction; S16-S31 are callee-saved by the handler's own code (AAPCS).
 * Exception return restores all of it, so the thread's FP/MVE state is intact.
 *
 * Stacks: thread mode runs on PSP, handlers on MSP, so the handler stack
 * holds only handler frames; board_run_in_interrupt repaints it before the
 * job and reports its high-water mark after.
 */
#include "board.h"
#include "cm_regs.h"
#include "cortex_m.h"

enum { JOB_IDLE = 0, JOB_ARMED = 1, JOB_RUNNING = 2, JOB_DONE = 3 };

void PendSV_Handler(void);

static void (*volatile job_fn)(void *arg);
static void *volatile job_arg;
static volatile uint32_t job_state;

int cm_job_start(void (*fn)(void *arg), void *arg)
{
    if (fn == 0 || cm_ipsr() != 0u || job_state == JOB_ARMED || job_state == JOB_RUNNING) {
        return -1;
    }
    job_fn = fn;
    job_arg = arg;
    cm_dsb();
    job_state = JOB_ARMED;
    return 0;
}

void cm_job_on_tick(void)
{
    if (job_state == JOB_ARMED) {
        job_state = JOB_RUNNING;
        CM_REG(CM_ICSR_ADDR) = CM_ICSR_PENDSVSET;
    }
}

void PendSV_Handler(void)
{
    if (job_state == JOB_RUNNING) {
        job_fn(job_arg);
        job_state = JOB_DONE;
    }
}

int cm_job_done(void)
{
    return job_state == JOB_DONE;
}

void cm_job_wait(void)
{
    while (job_state != JOB_DONE) {
        __asm__ volatile("wfi" ::: "memory"); /* woken by SysTick, 1 ms at most */
    }
}

int board_run_in_interrupt(void (*fn)(void *arg), void *arg, size_t *stack_used)
{
    if (stack_used != 0) {
        *stack_used = 0;
    }
    if (cm_ipsr() != 0u) {
        return -1;
    }
    cm_handler_stack_paint();
    if (cm_job_start(fn, arg) != 0) {
        return -1;
    }
    cm_job_wait();
    if (stack_used != 0) {
        *stack_used = cm_handler_stack_used();
    }
    return 0;
}
