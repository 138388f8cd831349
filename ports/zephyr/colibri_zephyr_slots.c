/*
 * colibri_zephyr_slots.c - A/B weight slots (docs/ota.md) in a devicetree
 * flash partition: the chosen "colibri,slots" node, else the partition
 * labelled colibri_slots. The partition is laid out by the rule of
 * docs/ota.md section 1 (colibri_slots_layout): two record copies, then slot
 * A and slot B. Images are read in place (memory-mapped flash, or the flash
 * simulator's memory); erase and program go through the flash driver, one
 * erase sector per call.
 *
 * With CONFIG_COLIBRI_NATIVE_SIM_POWER_CUT every erase of a sector and every
 * program is a numbered flash step, and the native_sim runner can cut the
 * power (SIGKILL) at a chosen one (ports/zephyr/native_sim).
 */
#include <errno.h>
#include <string.h>
#include <zephyr/cache.h>
#include <zephyr/device.h>
#include <zephyr/devicetree.h>
#include <zephyr/drivers/flash.h>
#include <zephyr/logging/log.h>
#include <zephyr/storage/flash_map.h>

#include "colibri_trusted_key.h"
#include "colibri_zephyr.h"

LOG_MODULE_DECLARE(colibri, CONFIG_COLIBRI_LOG_LEVEL);

#ifndef COLIBRI_ZEPHYR_SLOTS_NODE
#error "CONFIG_COLIBRI_SLOTS: no slots partition: point the chosen property colibri,slots at a " \
       "fixed partition, or label one colibri_slots (docs/zephyr.md)"
#endif
#if !DT_FIXED_PARTITION_EXISTS(COLIBRI_ZEPHYR_SLOTS_NODE)
#error "CONFIG_COLIBRI_SLOTS: the colibri,slots node is not a fixed-partitions child"
#endif
#ifndef CONFIG_FLASH_PAGE_LAYOUT
#error "CONFIG_COLIBRI_SLOTS needs CONFIG_FLASH_PAGE_LAYOUT (the erase sector size)"
#endif

#define SLOTS_NODE COLIBRI_ZEPHYR_SLOTS_NODE
#define SLOTS_MTD DT_MTD_FROM_FIXED_PARTITION(SLOTS_NODE)
#define SLOTS_OFFSET ((off_t)DT_REG_ADDR(SLOTS_NODE))
#define SLOTS_SIZE ((uint64_t)DT_REG_SIZE(SLOTS_NODE))
#define PROGRAM_UNIT_MAX 256u

#if DT_NODE_HAS_COMPAT(SLOTS_MTD, zephyr_sim_flash)
#include <zephyr/drivers/flash/flash_simulator.h>
#define SLOTS_SIMULATED 1
#elif DT_NODE_HAS_COMPAT(DT_GPARENT(SLOTS_NODE), soc_nv_flash)
#define SLOTS_SIMULATED 0
#else
#error "CONFIG_COLIBRI_SLOTS: the slots partition must be in memory-mapped flash (a soc-nv-flash " \
       "node, or the flash simulator): images are read in place"
#endif

#ifdef CONFIG_COLIBRI_NATIVE_SIM_POWER_CUT
/* Runner side (ports/zephyr/native_sim/colibri_nsim_power_cut.c). */
int colibri_nsim_flash_step(int program, uint64_t offset, uint64_t size);
void colibri_nsim_power_off(void);
#define STEP_CUT_TORN 2 /* colibri_nsim_flash_step: cut after half of a program */
#else
#define colibri_nsim_flash_step(program, offset, size) 0
#define colibri_nsim_power_off() ((void)0)
#endif

typedef struct zephyr_slots {
    colibri_slots slots;
    const struct device *flash;
    size_t unit;           /* the flash's write block size */
    uint8_t erased;        /* the flash's erase value */
    uint32_t largest_page; /* scratch of largest_page_in() */
} zephyr_slots;

static zephyr_slots store;

static const uint8_t *slots_memory(const struct device *flash)
{
#if SLOTS_SIMULATED
    size_t size = 0;
    uint8_t *memory = flash_simulator_get_memory(flash, &size);
    if (memory == NULL || (uint64_t)SLOTS_OFFSET + SLOTS_SIZE > size) {
        return NULL;
    }
    return memory + SLOTS_OFFSET;
#else
    (void)flash;
    return (const uint8_t *)(uintptr_t)DT_FIXED_PARTITION_ADDR(SLOTS_NODE);
#endif
}

static bool page_in_partition(const struct flash_pages_info *info, void *data)
{
    zephyr_slots *z = data;
    uint64_t end = (uint64_t)SLOTS_OFFSET + SLOTS_SIZE;
    if ((uint64_t)info->start_offset < end &&
        (uint64_t)info->start_offset + info->size > (uint64_t)SLOTS_OFFSET &&
        info->size > z->largest_page) {
        z->largest_page = (uint32_t)info->size;
    }
    return (uint64_t)info->start_offset < end;
}

/* The erase sector of the layout: the largest page of the partition (a
 * flash with pages of several sizes gets sectors of the largest). */
static uint32_t largest_page_in(zephyr_slots *z)
{
    z->largest_page = 0;
    flash_page_foreach(z->flash, page_in_partition, z);
    return z->largest_page;
}

/* The core reads the flash in place after each erase and program: no data
 * cache line may still hold what was there before (a no-op without one). */
static void forget_cached(zephyr_slots *z, uint64_t offset, uint64_t size)
{
    (void)sys_cache_data_invd_range((void *)(uintptr_t)(z->slots.base + offset), (size_t)size);
}

static colibri_status slots_erase(void *ctx, uint64_t offset, uint64_t size)
{
    zephyr_slots *z = ctx;
    uint32_t sector = z->slots.sector_size;
    for (uint64_t at = offset; at < offset + size; at += sector) {
        if (colibri_nsim_flash_step(0, at, sector) != 0) {
            colibri_nsim_power_off();
        }
        if (flash_erase(z->flash, SLOTS_OFFSET + (off_t)at, sector) != 0) {
            return COLIBRI_E_FLASH;
        }
        forget_cached(z, at, sector);
    }
    return COLIBRI_OK;
}

/* Program [offset, offset + size), whose first unit may be partly written
 * already (a previous call's tail, padded) and whose last may be partial:
 * those units are written whole, with the flash's bytes before the data and
 * the erase value after it. */
static int program_units(zephyr_slots *z, uint64_t offset, const uint8_t *data, size_t size)
{
    uint8_t unit[PROGRAM_UNIT_MAX];
    size_t u = z->unit;
    while (size > 0) {
        uint64_t start = offset & ~(uint64_t)(u - 1); /* u: a power of two */
        size_t skip = (size_t)(offset - start);
        size_t whole = skip == 0 ? size & ~(u - 1) : 0;
        if (whole > 0) {
            if (flash_write(z->flash, SLOTS_OFFSET + (off_t)offset, data, whole) != 0) {
                return -EIO;
            }
        } else {
            size_t n = size < u - skip ? size : u - skip;
            memcpy(unit, z->slots.base + start, skip);
            memcpy(unit + skip, data, n);
            memset(unit + skip + n, z->erased, u - skip - n);
            if (flash_write(z->flash, SLOTS_OFFSET + (off_t)start, unit, u) != 0) {
                return -EIO;
            }
            whole = n;
        }
        offset += whole;
        data += whole;
        size -= whole;
    }
    return 0;
}

static colibri_status slots_program(void *ctx, uint64_t offset, const void *data, size_t size)
{
    zephyr_slots *z = ctx;
    int step = colibri_nsim_flash_step(1, offset, size);
    if (step != 0) {
#ifdef CONFIG_COLIBRI_NATIVE_SIM_POWER_CUT
        if (step == STEP_CUT_TORN) {
            (void)program_units(z, offset, data, size / 2); /* half of it reaches the flash */
        }
#endif
        colibri_nsim_power_off();
    }
    int written = program_units(z, offset, data, size);
    uint64_t first = offset & ~(uint64_t)(z->unit - 1);
    uint64_t end = offset + size + (z->unit - 1);
    forget_cached(z, first, (end & ~(uint64_t)(z->unit - 1)) - first);
    return written == 0 ? COLIBRI_OK : COLIBRI_E_FLASH;
}

const colibri_slots *colibri_zephyr_slots(const uint8_t *trusted_key)
{
    zephyr_slots *z = &store;
    memset(z, 0, sizeof *z);
    z->flash = DEVICE_DT_GET(SLOTS_MTD);
    if (!device_is_ready(z->flash)) {
        LOG_ERR("slots: flash device %s not ready", z->flash->name);
        return NULL;
    }
    const struct flash_parameters *params = flash_get_parameters(z->flash);
    z->unit = flash_get_write_block_size(z->flash);
    z->erased = params->erase_value;
    uint32_t sector = largest_page_in(z);
    if (z->unit == 0 || z->unit > PROGRAM_UNIT_MAX || (z->unit & (z->unit - 1)) != 0) {
        LOG_ERR("slots: a %u-byte write block is not supported", (unsigned)z->unit);
        return NULL;
    }
    colibri_slots_layout(&z->slots, SLOTS_SIZE, sector);
    z->slots.base = slots_memory(z->flash);
    z->slots.erase = slots_erase;
    z->slots.program = slots_program;
    z->slots.ctx = z;
    z->slots.trusted_key = trusted_key;
    if (colibri_slots_check(&z->slots) != COLIBRI_OK || (SLOTS_OFFSET & (sector - 1)) != 0) {
        LOG_ERR("slots: partition at 0x%lx (%llu bytes, %u-byte sectors) cannot hold two "
                "records and two slots",
                (unsigned long)SLOTS_OFFSET, (unsigned long long)SLOTS_SIZE, (unsigned)sector);
        return NULL;
    }
    LOG_INF("slots: partition at 0x%lx, records 2 x %u bytes, slots 2 x %llu bytes",
            (unsigned long)SLOTS_OFFSET, (unsigned)sector, (unsigned long long)z->slots.slot_size);
    return &z->slots;
}

const uint8_t *colibri_zephyr_trusted_key(void)
{
    static const uint8_t key[32] = COLIBRI_TRUSTED_KEY;
    return COLIBRI_TRUSTED_KEY_PRESENT ? key : NULL;
}
