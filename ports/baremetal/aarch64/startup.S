/*
 * startup.S - reset entry of the AArch64 bare-metal port.
 *
 * Entered at EL2 or EL1 with the MMU and data cache off (QEMU -kernel, or a
 * boot loader following the arm64 boot protocol). In order:
 *
 *   1. mask interrupts; park any core but the first (this port runs on
 *      one core); at EL2, configure EL2 to stay out of the way (EL1 is
 *      AArch64, no traps of FP/SIMD, timers, counters or the PMU) and ERET to
 *      EL1h; EL3 entry is not supported (exit status 4);
 *   2. SCTLR_EL1 to a known state (MMU, caches, alignment checks off);
 *   3. enable FP/SIMD (CPACR_EL1.FPEN) before any compiled code runs;
 *   4. SP_EL1 = top of the interrupt stack, then switch to SP_EL0 = top of the
 *      main stack: thread code runs at EL1t, exceptions on their own stack;
 *   5. VBAR_EL1 = aarch64_vectors, so a fault from here on is reported;
 *   6. zero .bss, copy .data from its load address;
 *   7. aarch64_mmu_enable() (mmu.c): identity map, caches on;
 *   8. main(), then board_exit(main's return value).
 *
 * Steps 1-6 touch memory with the MMU off (Device-nGnRnE): only aligned
 * 8/16-byte accesses here, and mmu.c is built with -mstrict-align.
 */
#define SCTLR_EL1_RES1 0x30D00800      /* bits 29,28,23,22,20,11 */
#define HCR_EL2_RW (1 << 31)           /* EL1 is AArch64 */
#define CNTHCTL_EL2_EL1_ACCESS 3       /* EL1PCTEN | EL1PCEN */
#define CPTR_EL2_RES1 0x33FF           /* TFP (bit 10) = 0: no FP traps */
#define SPSR_EL1H_MASKED 0x3C5         /* EL1h, D A I F masked */
#define CPACR_EL1_FPEN (3 << 20)
#define STARTUP_EXIT_BAD_EL 4

    .section .text.boot, "ax"
    .global _start
    .type _start, %function
_start:
    msr     daifset, #0xf
    mrs     x0, mpidr_el1
    and     x0, x0, #0xffffff               /* Aff2..Aff0: 0 on the boot core */
    cbnz    x0, park_secondary
    mrs     x19, CurrentEL
    lsr     x19, x19, #2                    /* x19 = entry EL, kept for C */
    cmp     x19, #1
    b.eq    el1_entry
    cmp     x19, #2
    b.eq    el2_entry
    ldr     x0, =__main_stack_top           /* EL3: report and stop */
    mov     sp, x0
    mov     w0, #STARTUP_EXIT_BAD_EL
    b       aarch64_semihosting_exit

park_secondary:                             /* one core only: others sleep */
    wfe
    b       park_secondary

el2_entry:
    mov     x0, #HCR_EL2_RW
    msr     hcr_el2, x0
    mrs     x0, cnthctl_el2
    orr     x0, x0, #CNTHCTL_EL2_EL1_ACCESS
    msr     cnthctl_el2, x0
    msr     cntvoff_el2, xzr
    mov     x0, #CPTR_EL2_RES1
    msr     cptr_el2, x0
    mrs     x0, pmcr_el0
    ubfx    x0, x0, #11, #5                 /* MDCR_EL2.HPMN = PMCR_EL0.N, */
    msr     mdcr_el2, x0                    /* no PMU or debug traps */
    msr     hstr_el2, xzr
    mrs     x0, midr_el1
    msr     vpidr_el2, x0
    mrs     x0, mpidr_el1
    msr     vmpidr_el2, x0
    ldr     x0, =SCTLR_EL1_RES1
    msr     sctlr_el1, x0
    mov     x0, #SPSR_EL1H_MASKED
    msr     spsr_el2, x0
    adr     x0, el1_entry
    msr     elr_el2, x0
    eret

el1_entry:
    ldr     x0, =SCTLR_EL1_RES1
    msr     sctlr_el1, x0
    isb
    mrs     x0, cpacr_el1
    orr     x0, x0, #CPACR_EL1_FPEN
    msr     cpacr_el1, x0
    isb

    ldr     x0, =__irq_stack_top            /* SPSel is 1: this is SP_EL1 */
    mov     sp, x0
    msr     spsel, #0
    ldr     x0, =__main_stack_top           /* and this SP_EL0 */
    mov     sp, x0
    ldr     x0, =aarch64_vectors
    msr     vbar_el1, x0
    isb

    ldr     x0, =__bss_start
    ldr     x1, =__bss_end
    bl      zero_range
    ldr     x0, =__data_start
    ldr     x1, =__data_end
    ldr     x2, =__data_load
    bl      copy_range

    ldr     x0, =aarch64_entry_el
    str     w19, [x0]
    bl      aarch64_mmu_enable
    bl      main
    bl      board_exit                      /* w0 = main's status; no return */
    .size _start, . - _start

/* zero [x0, x1): both 16-byte aligned (link.ld) */
    .type zero_range, %function
zero_range:
    cmp     x0, x1
    b.hs    1f
    stp     xzr, xzr, [x0], #16
    b       zero_range
1:  ret
    .size zero_range, . - zero_range

/* copy [x2, x2 + (x1 - x0)) to [x0, x1), unless already there (16-byte aligned) */
    .type copy_range, %function
copy_range:
    cmp     x0, x2
    b.eq    2f
1:  cmp     x0, x1
    b.hs    2f
    ldp     x3, x4, [x2], #16
    stp     x3, x4, [x0], #16
    b       1b
2:  ret
    .size copy_range, . - copy_range
