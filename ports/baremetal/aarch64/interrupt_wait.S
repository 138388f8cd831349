/*
 * interrupt_wait.S - the thread side of board_run_in_interrupt: sleep until
 * the interrupt job has run, and prove on the way that the interrupt left the
 * thread's registers alone.
 *
 *   uint64_t aarch64_wait_for_flag(volatile uint32_t *flag);
 *
 * Called with IRQs masked. Fills q0-q31 with a different byte pattern each
 * (0x40 + n), x9-x15 with markers, sets FPCR.FZ|DN and clears FPSR, then
 * loops: WFI (wakes on the pending IRQ although it is masked), unmask so the
 * IRQ is taken, mask again, until *flag is nonzero. The handler runs
 * colibri_forward, which uses every one of these registers, so anything the
 * exception entry (vectors.S) fails to save and restore shows up here.
 *
 * Returns 0, or a mask of what changed: bit n for qn, bit 32 FPCR, bit 33
 * FPSR, bit 34 one of x9-x15. FPCR and FPSR are restored before returning.
 */
#define FPCR_FZ_DN (3 << 24)
#define X_MARK 0x5AFE

    .text
    .global aarch64_wait_for_flag
    .type aarch64_wait_for_flag, %function
aarch64_wait_for_flag:
    stp     d8, d9, [sp, #-64]!             /* d8-d15 are callee-saved (AAPCS64) */
    stp     d10, d11, [sp, #16]
    stp     d12, d13, [sp, #32]
    stp     d14, d15, [sp, #48]
    mrs     x7, fpcr                        /* the caller's FPCR and FPSR, */
    mrs     x8, fpsr                        /* given back at the end */
    orr     x1, x7, #FPCR_FZ_DN
    msr     fpcr, x1
    msr     fpsr, xzr
    .irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
    movi    v\n\().16b, #(0x40 + \n)
    .endr
    .irp n, 9,10,11,12,13,14,15
    mov     x\n, #(X_MARK + \n)
    .endr

1:  ldr     w1, [x0]
    cbnz    w1, 2f
    dsb     sy
    wfi
    msr     daifclr, #2                     /* the pending IRQ is taken here */
    isb
    msr     daifset, #2
    b       1b

2:  mov     x0, #0                          /* the mask of changed registers */
    .irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
    mov     x3, #(0x40 + \n)
    orr     x3, x3, x3, lsl #8
    orr     x3, x3, x3, lsl #16
    orr     x3, x3, x3, lsl #32             /* the byte replicated 8 times */
    umov    x2, v\n\().d[0]
    umov    x4, v\n\().d[1]
    cmp     x2, x3
    ccmp    x4, x3, #0, eq
    cset    x5, ne
    orr     x0, x0, x5, lsl #\n
    .endr
    mrs     x2, fpcr
    orr     x3, x7, #FPCR_FZ_DN
    cmp     x2, x3
    cset    x5, ne
    orr     x0, x0, x5, lsl #32
    mrs     x2, fpsr
    cmp     x2, #0
    cset    x5, ne
    orr     x0, x0, x5, lsl #33
    mov     x6, #0
    .irp n, 9,10,11,12,13,14,15
    mov     x3, #(X_MARK + \n)
    cmp     x\n, x3
    cset    x5, ne
    orr     x6, x6, x5
    .endr
    orr     x0, x0, x6, lsl #34
    msr     fpcr, x7
    msr     fpsr, x8
    ldp     d14, d15, [sp, #48]
    ldp     d12, d13, [sp, #32]
    ldp     d10, d11, [sp, #16]
    ldp     d8, d9, [sp], #64
    ret
    .size aarch64_wait_for_flag, . - aarch64_wait_for_flag
