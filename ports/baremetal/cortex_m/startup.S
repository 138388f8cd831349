/*
 * startup.S - reset entry of the Cortex-M port (Cortex-M7 and Cortex-M55).
 *
 * Reset_Handler, in this order and before any C code runs:
 *   1. masks interrupts;
 *   2. gives full access to CP10/CP11 (FPU, and MVE on the M55), DSB + ISB:
 *      the compiler may use FP/MVE registers in any C function, even for a
 *      struct copy, so this must come before the first C call;
 *   3. sets FPCCR.ASPEN|LSPEN: a thread that used the FPU gets an extended
 *      exception frame whose FP part the hardware saves lazily, on the
 *      handler's first FP instruction (reset values on M7/M55, set anyway);
 *   4. points VTOR at the linked vector table;
 *   5. sets up two stacks: MSP for handlers (__msp_*), PSP for thread mode
 *      (__psp_*), and on ARMv8-M their limit registers (stack overflow is a
 *      UsageFault there); paints both with CM_STACK_PAINT for high-water marks;
 *   6. copies .data from its load address, zeroes .bss;
 *   7. calls main with interrupts enabled, and board_exit(main's result).
 *
 * cm_fault_entry is the common entry of HardFault/MemManage/BusFault/
 * UsageFault (and SecureFault): it hands the stacked frame to
 * cm_fault_report (C). In a Secure image built with -mcmse (the TrustZone
 * split, docs/trustzone.md) a fault of Non-secure code stacked its frame on
 * the Non-secure stack, EXC_RETURN.S clear: it reads that one.
 */
#include "cm_regs.h"

    .syntax unified
    .thumb

    .section .text.Reset_Handler, "ax", %progbits
    .global Reset_Handler
    .type Reset_Handler, %function
    .thumb_func
Reset_Handler:
    cpsid   i

    ldr     r0, =CM_CPACR_ADDR
    ldr     r1, [r0]
    orr     r1, r1, #CM_CPACR_CP10_CP11_FULL
    str     r1, [r0]
    dsb
    isb

    ldr     r0, =CM_FPCCR_ADDR
    ldr     r1, [r0]
    orr     r1, r1, #(CM_FPCCR_ASPEN | CM_FPCCR_LSPEN)
    str     r1, [r0]

    ldr     r0, =CM_VTOR_ADDR
    ldr     r1, =__vectors_start
    str     r1, [r0]
    dsb

    /* Paint both stacks while no stack is in use yet. */
    ldr     r2, =CM_STACK_PAINT
    ldr     r0, =__stacks_start
    ldr     r1, =__stacks_end
1:  cmp     r0, r1
    bhs     2f
    str     r2, [r0], #4
    b       1b
2:
    ldr     r0, =__msp_top
    msr     msp, r0
    ldr     r0, =__psp_top
    msr     psp, r0
#if defined(__ARM_ARCH_8M_MAIN__) || defined(__ARM_ARCH_8_1M_MAIN__)
    ldr     r0, =__msp_limit
    msr     msplim, r0
    ldr     r0, =__psp_limit
    msr     psplim, r0
#endif
    mrs     r0, control
    orr     r0, r0, #2              /* SPSEL: thread mode runs on PSP */
    msr     control, r0
    isb

    ldr     r0, =__data_start
    ldr     r1, =__data_end
    ldr     r2, =__data_load
3:  cmp     r0, r1
    bhs     4f
    ldr     r3, [r2], #4
    str     r3, [r0], #4
    b       3b
4:
    ldr     r0, =__bss_start
    ldr     r1, =__bss_end
    movs    r2, #0
5:  cmp     r0, r1
    bhs     6f
    str     r2, [r0], #4
    b       5b
6:
    cpsie   i
    bl      main
    bl      board_exit
7:  b       7b
    .size Reset_Handler, . - Reset_Handler

    .section .text.cm_fault_entry, "ax", %progbits
    .global cm_fault_entry
    .type cm_fault_entry, %function
    .thumb_func
cm_fault_entry:
#if defined(__ARM_FEATURE_CMSE) && __ARM_FEATURE_CMSE == 3
    tst     lr, #0x40               /* EXC_RETURN.S clear: the frame is Non-secure's, */
    bne     1f
    mrs     r0, msp_ns              /* on MSP_NS from its handlers, */
    tst     lr, #8
    beq     2f
    mrs     r1, control_ns          /* and from its threads as CONTROL_NS.SPSEL says (QEMU */
    tst     r1, #2                  /* 7.2 gave EXC_RETURN.SPSEL 1 for a frame on MSP_NS) */
    it      ne
    mrsne   r0, psp_ns
2:  mov     r1, lr
    b       cm_fault_report         /* which reads it only where Non-secure code could */
1:  tst     lr, #0x20               /* DCRS clear: the integrity signature and r4-r11 */
    bne     3f                      /* (40 bytes) come before the basic frame */
    tst     lr, #4
    ite     eq
    mrseq   r0, msp
    mrsne   r0, psp
    add     r0, r0, #40
    mov     r1, lr
    b       cm_fault_report
3:
#endif
    tst     lr, #4                  /* EXC_RETURN.SPSEL: which stack holds the frame */
    ite     eq
    mrseq   r0, msp
    mrsne   r0, psp
    mov     r1, lr
    b       cm_fault_report
    .size cm_fault_entry, . - cm_fault_entry
