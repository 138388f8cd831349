/*
 * colibri_zephyr_storage.c - the model image read from a flash partition
 * through Zephyr's flash driver API (CONFIG_COLIBRI_STORAGE): the read hook
 * of the core's expert cache, and how the image's start gets into RAM, on a
 * board whose image is not in the address map (docs/zephyr.md, "Experts
 * from a flash partition"). The partition is the fixed partition the chosen
 * property "colibri,storage" points at, else the one labelled
 * colibri_storage; any flash driver Zephyr has serves it (QSPI/OSPI NOR, the
 * flash simulator). flash_read at the partition's offset is what the flash
 * map's flash_area_read does, without the flash map subsystem.
 */
#include <errno.h>

#include <zephyr/device.h>
#include <zephyr/devicetree.h>
#include <zephyr/drivers/flash.h>
#include <zephyr/storage/flash_map.h>

#include "colibri_zephyr.h"

#if DT_HAS_CHOSEN(colibri_storage)
#define STORAGE_NODE DT_CHOSEN(colibri_storage)
#elif DT_NODE_EXISTS(DT_NODELABEL(colibri_storage))
#define STORAGE_NODE DT_NODELABEL(colibri_storage)
#else
#error "CONFIG_COLIBRI_STORAGE: no partition: point the chosen property colibri,storage at a " \
       "fixed partition, or label one colibri_storage (docs/zephyr.md)"
#endif
#if !DT_FIXED_PARTITION_EXISTS(STORAGE_NODE)
#error "CONFIG_COLIBRI_STORAGE: the colibri,storage node is not a fixed-partitions child"
#endif

#define STORAGE_OFFSET ((uint64_t)DT_REG_ADDR(STORAGE_NODE))
#define STORAGE_SIZE ((uint64_t)DT_REG_SIZE(STORAGE_NODE))

static const struct device *const storage_flash =
    DEVICE_DT_GET(DT_MTD_FROM_FIXED_PARTITION(STORAGE_NODE));
static bool storage_ready;

int64_t colibri_zephyr_storage_open(void)
{
    storage_ready = device_is_ready(storage_flash);
    return storage_ready ? (int64_t)STORAGE_SIZE : -ENODEV;
}

int colibri_zephyr_storage_read(void *ctx, uint64_t offset, void *dst, size_t size)
{
    (void)ctx;
    if (!storage_ready) {
        return -ENODEV;
    }
    if (offset > STORAGE_SIZE || size > STORAGE_SIZE - offset) {
        return -EINVAL;
    }
    return flash_read(storage_flash, (off_t)(STORAGE_OFFSET + offset), dst, size);
}
