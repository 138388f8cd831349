/*
 * vectors.S - the EL1 exception vector table (VBAR_EL1) and the one entry
 * path behind it.
 *
 * Each of the 16 slots pushes a full context frame (context.h: x0-x30,
 * ELR/SPSR, FPCR/FPSR and all of q0-q31) on the SP_EL1 stack, calls
 * aarch64_exception_dispatch(slot, frame) and restores everything before ERET.
 * Saving the vector registers is not optional: the timer interrupt handler
 * runs colibri_forward, which is floating-point code, on top of whatever the
 * interrupted thread had in its FP/SIMD registers.
 *
 * Thread code runs at EL1 on SP_EL0 (startup.S), so every exception switches
 * to SP_EL1, the interrupt stack: its size is what board_run_in_interrupt
 * measures.
 */
#include "context.h"

    .macro VECTOR_SLOT slot
    .balign 0x80
    sub     sp, sp, #CTX_SIZE
    stp     x0, x1, [sp, #CTX_X0]
    mov     x0, #\slot
    b       exception_entry
    .endm

    .section .text.vectors, "ax"
    .balign 2048
    .global aarch64_vectors
aarch64_vectors:
    VECTOR_SLOT 0
    VECTOR_SLOT 1
    VECTOR_SLOT 2
    VECTOR_SLOT 3
    VECTOR_SLOT 4
    VECTOR_SLOT 5
    VECTOR_SLOT 6
    VECTOR_SLOT 7
    VECTOR_SLOT 8
    VECTOR_SLOT 9
    VECTOR_SLOT 10
    VECTOR_SLOT 11
    VECTOR_SLOT 12
    VECTOR_SLOT 13
    VECTOR_SLOT 14
    VECTOR_SLOT 15

    .balign 0x80
    .type exception_entry, %function
exception_entry:
    stp     x2, x3, [sp, #16]
    stp     x4, x5, [sp, #32]
    stp     x6, x7, [sp, #48]
    stp     x8, x9, [sp, #64]
    stp     x10, x11, [sp, #80]
    stp     x12, x13, [sp, #96]
    stp     x14, x15, [sp, #112]
    stp     x16, x17, [sp, #128]
    stp     x18, x19, [sp, #144]
    stp     x20, x21, [sp, #160]
    stp     x22, x23, [sp, #176]
    stp     x24, x25, [sp, #192]
    stp     x26, x27, [sp, #208]
    stp     x28, x29, [sp, #224]
    mrs     x2, elr_el1
    stp     x30, x2, [sp, #240]             /* x30 at 240, ELR at CTX_ELR */
    mrs     x2, spsr_el1
    mrs     x3, fpcr
    stp     x2, x3, [sp, #CTX_SPSR]         /* SPSR, then FPCR */
    mrs     x2, fpsr
    str     x2, [sp, #CTX_FPSR]
    stp     q0, q1, [sp, #(CTX_Q0 + 0 * 32)]
    stp     q2, q3, [sp, #(CTX_Q0 + 1 * 32)]
    stp     q4, q5, [sp, #(CTX_Q0 + 2 * 32)]
    stp     q6, q7, [sp, #(CTX_Q0 + 3 * 32)]
    stp     q8, q9, [sp, #(CTX_Q0 + 4 * 32)]
    stp     q10, q11, [sp, #(CTX_Q0 + 5 * 32)]
    stp     q12, q13, [sp, #(CTX_Q0 + 6 * 32)]
    stp     q14, q15, [sp, #(CTX_Q0 + 7 * 32)]
    stp     q16, q17, [sp, #(CTX_Q0 + 8 * 32)]
    stp     q18, q19, [sp, #(CTX_Q0 + 9 * 32)]
    stp     q20, q21, [sp, #(CTX_Q0 + 10 * 32)]
    stp     q22, q23, [sp, #(CTX_Q0 + 11 * 32)]
    stp     q24, q25, [sp, #(CTX_Q0 + 12 * 32)]
    stp     q26, q27, [sp, #(CTX_Q0 + 13 * 32)]
    stp     q28, q29, [sp, #(CTX_Q0 + 14 * 32)]
    stp     q30, q31, [sp, #(CTX_Q0 + 15 * 32)]

    mov     x1, sp
    bl      aarch64_exception_dispatch      /* (slot in x0, frame in x1) */

    ldp     q0, q1, [sp, #(CTX_Q0 + 0 * 32)]
    ldp     q2, q3, [sp, #(CTX_Q0 + 1 * 32)]
    ldp     q4, q5, [sp, #(CTX_Q0 + 2 * 32)]
    ldp     q6, q7, [sp, #(CTX_Q0 + 3 * 32)]
    ldp     q8, q9, [sp, #(CTX_Q0 + 4 * 32)]
    ldp     q10, q11, [sp, #(CTX_Q0 + 5 * 32)]
    ldp     q12, q13, [sp, #(CTX_Q0 + 6 * 32)]
    ldp     q14, q15, [sp, #(CTX_Q0 + 7 * 32)]
    ldp     q16, q17, [sp, #(CTX_Q0 + 8 * 32)]
    ldp     q18, q19, [sp, #(CTX_Q0 + 9 * 32)]
    ldp     q20, q21, [sp, #(CTX_Q0 + 10 * 32)]
    ldp     q22, q23, [sp, #(CTX_Q0 + 11 * 32)]
    ldp     q24, q25, [sp, #(CTX_Q0 + 12 * 32)]
    ldp     q26, q27, [sp, #(CTX_Q0 + 13 * 32)]
    ldp     q28, q29, [sp, #(CTX_Q0 + 14 * 32)]
    ldp     q30, q31, [sp, #(CTX_Q0 + 15 * 32)]
    ldp     x2, x3, [sp, #CTX_SPSR]
    msr     spsr_el1, x2
    msr     fpcr, x3
    ldr     x2, [sp, #CTX_FPSR]
    msr     fpsr, x2
    ldp     x30, x2, [sp, #240]
    msr     elr_el1, x2
    ldp     x28, x29, [sp, #224]
    ldp     x26, x27, [sp, #208]
    ldp     x24, x25, [sp, #192]
    ldp     x22, x23, [sp, #176]
    ldp     x20, x21, [sp, #160]
    ldp     x18, x19, [sp, #144]
    ldp     x16, x17, [sp, #128]
    ldp     x14, x15, [sp, #112]
    ldp     x12, x13, [sp, #96]
    ldp     x10, x11, [sp, #80]
    ldp     x8, x9, [sp, #64]
    ldp     x6, x7, [sp, #48]
    ldp     x4, x5, [sp, #32]
    ldp     x2, x3, [sp, #16]
    ldp     x0, x1, [sp, #CTX_X0]
    add     sp, sp, #CTX_SIZE
    eret
    .size exception_entry, . - exception_entry
