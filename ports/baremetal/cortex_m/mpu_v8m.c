/*
 * mpu_v8m.c - the weight window in the ARMv8-M MPU (PMSAv8: Cortex-M55).
 *
 * PMSAv8 regions are [base, limit] in 32-byte granules and must not overlap
 * (an address in two regions faults), and AP has no "no access" encoding.
 * So, compared with mpu_v7m.c:
 *   region 0, the weights: Normal memory, write-through non-transient,
 *     read-allocate (MAIR attribute 0xAA), not shareable, read-only at any
 *     privilege (AP 0b11), execute-never;
 *   regions 1 and 2, the guard parts below and above the weights (when the
 *     board has a guard window): Device-nGnRnE (MAIR 0x00), read-only
 *     privileged, execute-never. Device memory is never read speculatively.
 * With size 0 (the window cannot be read yet) the whole guard is region 2.
 */
#include "cm_regs.h"
#include "cortex_m.h"

#define MAIR_NORMAL_WT_RA 0xAAu /* outer and inner: write-through, non-transient, read-allocate */
#define MAIR_DEVICE_NGNRNE 0x00u
#define ATTR_WEIGHTS 0u
#define ATTR_GUARD 1u

#define RBAR_XN 0x1u
#define RBAR_AP_RO_PRIVILEGED (0x2u << 1)
#define RBAR_AP_RO_ANY (0x3u << 1)
#define RLAR_ENABLE 0x1u

static void set_region(uint32_t number, uintptr_t base, uintptr_t end, uint32_t rbar_bits,
                       uint32_t attr)
{
    CM_REG(CM_MPU_RNR_ADDR) = number;
    CM_REG(CM_MPU_RBAR_ADDR) = (uint32_t)base | rbar_bits;
    CM_REG(CM_MPU_RLAR_ADDR) =
        (uint32_t)((end - 32u) & ~(uintptr_t)31u) | (attr << 1) | RLAR_ENABLE;
}

static int granular(uintptr_t address)
{
    return address % 32u == 0u;
}

/* Disable every region: a bootloader may have left some enabled. */
static void disable_all(uint32_t regions)
{
    for (uint32_t number = 0; number < regions; number++) {
        CM_REG(CM_MPU_RNR_ADDR) = number;
        CM_REG(CM_MPU_RLAR_ADDR) = 0;
    }
}

int cm_mpu_protect_weights(uintptr_t base, uint32_t size, uintptr_t guard_base, uint32_t guard_size)
{
    uint32_t regions = (CM_REG(CM_MPU_TYPE_ADDR) >> 8) & 0xFFu;
    uintptr_t end = base + size, guard_end = guard_base + guard_size;
    int guarded = guard_size != 0u;
    if (size == 0u) {
        base = end = guard_base; /* no weights region: the guard is all one part */
    }
    if (regions < 3u || !granular(base) || !granular(end) ||
        (guarded &&
         (!granular(guard_base) || !granular(guard_end) || guard_base > base || guard_end < end))) {
        return -1;
    }
    cm_dsb();
    CM_REG(CM_MPU_CTRL_ADDR) = 0;
    disable_all(regions);
    CM_REG(CM_MPU_MAIR0_ADDR) =
        (MAIR_NORMAL_WT_RA << (8u * ATTR_WEIGHTS)) | (MAIR_DEVICE_NGNRNE << (8u * ATTR_GUARD));
    if (size != 0u) {
        set_region(0, base, end, RBAR_AP_RO_ANY | RBAR_XN, ATTR_WEIGHTS);
    }
    if (guarded && guard_base < base) {
        set_region(1, guard_base, base, RBAR_AP_RO_PRIVILEGED | RBAR_XN, ATTR_GUARD);
    }
    if (guarded && end < guard_end) {
        set_region(2, end, guard_end, RBAR_AP_RO_PRIVILEGED | RBAR_XN, ATTR_GUARD);
    }
    CM_REG(CM_MPU_CTRL_ADDR) = CM_MPU_CTRL_ENABLE | CM_MPU_CTRL_PRIVDEFENA;
    cm_dsb();
    cm_isb();
    return 0;
}
