/*
 * faults.c - report a fault on the console and end the program, so that a
 * test sees "FAULT ..." and an exit status instead of a hang. One fault is
 * expected and survived: the MemManage fault of cm_write_faults, the probe
 * that shows the MPU keeps the weights read-only.
 */
#include "board.h"
#include "cm_regs.h"
#include "console.h"
#include "cortex_m.h"

#define CFSR_MMARVALID 0x80u
#define CFSR_MEMMANAGE_BITS 0xFFu

void cm_fault_report(uint32_t *frame, uint32_t exc_return);
void cm_unexpected_exception(void);

static volatile uint32_t probe_address; /* 0: no probe under way */
static volatile int probe_faulted;

int cm_write_faults(volatile uint32_t *address)
{
    probe_faulted = 0;
    probe_address = (uint32_t)(uintptr_t)address;
    cm_dsb();
    uint32_t value = *address;
    *address = value; /* the same value: harmless where writing is allowed */
    cm_dsb();
    probe_address = 0;
    return probe_faulted;
}

/* 2 or 4: the size of the Thumb instruction at pc. */
static uint32_t thumb_size(uint32_t pc)
{
    uint16_t first = *(const volatile uint16_t *)(uintptr_t)pc;
    return (first >> 11) >= 0x1Du ? 4u : 2u;
}

/* The probe's own fault: note it, clear it, resume after the store. */
static int probe_fault_handled(uint32_t *frame)
{
    uint32_t cfsr = CM_REG(CM_CFSR_ADDR);
    if (probe_address == 0u || (cfsr & CFSR_MMARVALID) == 0u ||
        CM_REG(CM_MMFAR_ADDR) != probe_address) {
        return 0;
    }
    probe_faulted = 1;
    CM_REG(CM_CFSR_ADDR) = cfsr & CFSR_MEMMANAGE_BITS; /* write 1 to clear */
    frame[6] += thumb_size(frame[6]);
    return 1;
}

void cm_faults_enable(void)
{
    CM_REG(CM_SHCSR_ADDR) |= CM_SHCSR_MEMFAULTENA | CM_SHCSR_BUSFAULTENA | CM_SHCSR_USGFAULTENA;
    cm_dsb();
    cm_isb();
}

static void put_field(const char *name, uint32_t value)
{
    console_puts(name);
    console_put_hex32(value);
}

#if defined(__ARM_FEATURE_CMSE) && __ARM_FEATURE_CMSE == 3
#include <arm_cmse.h>
/* A Secure image (the TrustZone split): a Non-secure fault's frame is where
 * the Non-secure side's stack pointer said, so it is read only where
 * Non-secure code could read it (else a fault would print Secure words). */
static uint32_t *readable_frame(uint32_t *frame, uint32_t exc_return)
{
    static uint32_t none[8];
    if ((exc_return & 0x40u) != 0u) {
        return frame;
    }
    return cmse_check_address_range(frame, sizeof none, CMSE_NONSECURE) != NULL ? frame : none;
}
#else
static uint32_t *readable_frame(uint32_t *frame, uint32_t exc_return)
{
    (void)exc_return;
    return frame;
}
#endif

/* frame: the stacked r0-r3, r12, lr, pc, xPSR of the faulting context. */
void cm_fault_report(uint32_t *frame, uint32_t exc_return)
{
    frame = readable_frame(frame, exc_return);
    if (probe_fault_handled(frame)) {
        return; /* exception return through the EXC_RETURN still in lr */
    }
    console_puts("\nFAULT");
    put_field(" exception=", cm_ipsr());
    put_field(" cfsr=", CM_REG(CM_CFSR_ADDR));
    put_field(" hfsr=", CM_REG(CM_HFSR_ADDR));
    put_field(" mmfar=", CM_REG(CM_MMFAR_ADDR));
    put_field(" bfar=", CM_REG(CM_BFAR_ADDR));
    put_field(" pc=", frame[6]);
    put_field(" lr=", frame[5]);
    put_field(" exc_return=", exc_return);
#if defined(__ARM_FEATURE_CMSE) && __ARM_FEATURE_CMSE == 3
    put_field(" sfsr=", CM_REG(CM_SFSR_ADDR)); /* a Secure image: SecureFault's cause */
#endif
    console_puts("\n");
    board_exit(CM_EXIT_FAULT);
}

void cm_unexpected_exception(void)
{
    console_puts("\nFAULT unexpected exception");
    put_field(" exception=", cm_ipsr());
    console_puts("\n");
    board_exit(CM_EXIT_FAULT);
}
