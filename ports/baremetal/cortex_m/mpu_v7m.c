/*
 * mpu_v7m.c - the weight window in the ARMv7-M MPU (PMSAv7: Cortex-M7).
 *
 * Region 0, the guard (the whole external-memory window, e.g. the STM32H7's
 * 256 MiB QUADSPI window at 0x90000000): strongly ordered, no access,
 * execute-never. The Cortex-M7 reads Normal memory speculatively; in the
 * default memory map 0x60000000-0x9FFFFFFF is Normal, so without this
 * region it may read past the end of the flash, where the QUADSPI answers
 * with an error or stalls. (This no-access attribute is Zephyr's
 * ATTR_MPU_EXTMEM on the STM32H7; used on the flash itself it faults every
 * read of the weights, which is why Zephyr's stm32h747i_disco uses
 * ATTR_MPU_IO, device memory, instead.)
 *
 * Region 1, the weights (higher number, so it wins where both match), sized
 * exactly to the flash: Normal, write-through cacheable, no write allocate
 * (TEX 0 C 1 B 0), not shareable, read-only (AP 0b110), execute-never.
 * Every address in it is backed, so speculative reads are harmless; reads
 * are cached and may be unaligned, unlike device memory.
 *
 * PMSAv7 regions are powers of two >= 32 bytes, aligned to their size.
 */
#include "cm_regs.h"
#include "cortex_m.h"

#define RASR_ENABLE 0x1u
#define RASR_XN (1u << 28)
#define RASR_AP_NONE (0u << 24)
#define RASR_AP_READ_ONLY (6u << 24)
#define RASR_SHAREABLE (1u << 18)
#define RASR_CACHEABLE (1u << 17)

#define REGION_GUARD 0u
#define REGION_WEIGHTS 1u

static int is_region(uintptr_t base, uint32_t size)
{
    return size >= 32u && (size & (size - 1u)) == 0u && base % size == 0u;
}

/* RASR.SIZE: the region is 2^(SIZE+1) bytes. */
static uint32_t rasr_size(uint32_t size)
{
    return (uint32_t)(30 - __builtin_clz(size)) << 1;
}

static void set_region(uint32_t number, uintptr_t base, uint32_t rasr)
{
    CM_REG(CM_MPU_RNR_ADDR) = number;
    CM_REG(CM_MPU_RBAR_ADDR) = (uint32_t)base;
    CM_REG(CM_MPU_RASR_ADDR) = rasr;
}

/* Disable every region: a bootloader may have left some enabled. */
static void disable_all(uint32_t regions)
{
    for (uint32_t number = 0; number < regions; number++) {
        CM_REG(CM_MPU_RNR_ADDR) = number;
        CM_REG(CM_MPU_RASR_ADDR) = 0;
    }
}

int cm_mpu_protect_weights(uintptr_t base, uint32_t size, uintptr_t guard_base, uint32_t guard_size)
{
    uint32_t regions = (CM_REG(CM_MPU_TYPE_ADDR) >> 8) & 0xFFu;
    if (regions < 2u || (size != 0u && !is_region(base, size)) ||
        (guard_size != 0u && !is_region(guard_base, guard_size))) {
        return -1;
    }
    cm_dsb();
    CM_REG(CM_MPU_CTRL_ADDR) = 0;
    disable_all(regions);
    if (guard_size != 0u) {
        set_region(REGION_GUARD, guard_base,
                   RASR_XN | RASR_AP_NONE | RASR_SHAREABLE | rasr_size(guard_size) | RASR_ENABLE);
    }
    if (size != 0u) {
        set_region(REGION_WEIGHTS, base,
                   RASR_XN | RASR_AP_READ_ONLY | RASR_CACHEABLE | rasr_size(size) | RASR_ENABLE);
    }
    CM_REG(CM_MPU_CTRL_ADDR) = CM_MPU_CTRL_ENABLE | CM_MPU_CTRL_PRIVDEFENA;
    cm_dsb();
    cm_isb();
    return 0;
}
