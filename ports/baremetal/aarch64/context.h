/*
 * context.h - the frame an exception entry (vectors.S) pushes on the SP_EL1
 * stack before it calls C, and the C view of it. Shared by assembly and C:
 * the offsets are plain macros, the struct is for C only.
 *
 *   offset   0 .. 247   x0 .. x30
 *   offset 248          ELR_EL1   (where the exception returns to)
 *   offset 256          SPSR_EL1
 *   offset 264          FPCR
 *   offset 272          FPSR
 *   offset 280          padding (keeps q0 16-byte aligned)
 *   offset 288 .. 799   q0 .. q31 (128 bits each)
 *
 * Every general and vector register is saved, so the C handler may run any
 * code, floating point included (colibri_forward from a timer interrupt).
 */
#ifndef COLIBRI_AARCH64_CONTEXT_H
#define COLIBRI_AARCH64_CONTEXT_H

#define CTX_X0 0
#define CTX_ELR 248
#define CTX_SPSR 256
#define CTX_FPCR 264
#define CTX_FPSR 272
#define CTX_Q0 288
#define CTX_SIZE 800

/* Vector table slot = 4 * source + type (Arm ARM: "Exception vectors"). */
#define VECTOR_TYPE_SYNC 0
#define VECTOR_TYPE_IRQ 1
#define VECTOR_TYPE_FIQ 2
#define VECTOR_TYPE_SERROR 3
#define VECTOR_FROM_EL1_SP0 0 /* thread mode: EL1 with SP_EL0 */
#define VECTOR_FROM_EL1_SPX 1 /* handler mode: EL1 with SP_EL1 */
#define VECTOR_FROM_EL0_A64 2
#define VECTOR_FROM_EL0_A32 3

#ifndef __ASSEMBLER__
#include <stdint.h>

typedef struct aarch64_context {
    uint64_t x[31];
    uint64_t elr;
    uint64_t spsr;
    uint64_t fpcr;
    uint64_t fpsr;
    uint64_t pad;
    uint64_t q[32][2];
} aarch64_context;

_Static_assert(sizeof(aarch64_context) == CTX_SIZE, "context frame size");
_Static_assert(__builtin_offsetof(aarch64_context, elr) == CTX_ELR, "ELR offset");
_Static_assert(__builtin_offsetof(aarch64_context, fpcr) == CTX_FPCR, "FPCR offset");
_Static_assert(__builtin_offsetof(aarch64_context, q) == CTX_Q0, "q0 offset");
_Static_assert(CTX_SIZE % 16 == 0, "SP must stay 16-byte aligned");

/* Called by vectors.S with the slot number (0..15) and the saved frame. */
void aarch64_exception_dispatch(uint64_t slot, aarch64_context *ctx);
#endif

#endif
