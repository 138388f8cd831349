/*
 * colibri_zephyr.h - what the Colibri Zephyr module gives an application:
 * the model image's address (from the devicetree, resolved at build time),
 * a tick source for colibri_port, and a way to run a function from an
 * interrupt handler.
 *
 *   #include "colibri.h"
 *   #include "colibri_zephyr.h"
 *   #include "model_config.h"
 *
 *   colibri_options opt = {COLIBRI_MODEL_FINGERPRINT, colibri_zephyr_port()};
 *   colibri_init(&model, colibri_zephyr_weights(), colibri_zephyr_weights_size(), &opt);
 *
 * The weights region is, in this order: the node the devicetree's chosen
 * property "colibri,weights" points at; the node labelled colibri_weights;
 * CONFIG_COLIBRI_WEIGHTS_ADDRESS/SIZE. The module's CMake resolves the same
 * node for the HEX image and the emulators, so they cannot disagree.
 */
#ifndef COLIBRI_ZEPHYR_H
#define COLIBRI_ZEPHYR_H

#include <stddef.h>
#include <stdint.h>

#include <zephyr/devicetree.h>

#include "colibri.h"

#ifdef __cplusplus
extern "C" {
#endif

#if DT_HAS_CHOSEN(colibri_weights)
#define COLIBRI_ZEPHYR_WEIGHTS_NODE DT_CHOSEN(colibri_weights)
#elif DT_NODE_EXISTS(DT_NODELABEL(colibri_weights))
#define COLIBRI_ZEPHYR_WEIGHTS_NODE DT_NODELABEL(colibri_weights)
#endif

#ifdef COLIBRI_ZEPHYR_WEIGHTS_NODE
#define COLIBRI_ZEPHYR_WEIGHTS_ADDRESS DT_REG_ADDR(COLIBRI_ZEPHYR_WEIGHTS_NODE)
#define COLIBRI_ZEPHYR_WEIGHTS_SIZE DT_REG_SIZE(COLIBRI_ZEPHYR_WEIGHTS_NODE)
#define COLIBRI_ZEPHYR_WEIGHTS_SOURCE "devicetree"
#else
#define COLIBRI_ZEPHYR_WEIGHTS_ADDRESS CONFIG_COLIBRI_WEIGHTS_ADDRESS
#define COLIBRI_ZEPHYR_WEIGHTS_SIZE CONFIG_COLIBRI_WEIGHTS_SIZE
#define COLIBRI_ZEPHYR_WEIGHTS_SOURCE "Kconfig"
#endif

/* Compile-time checks of a model_config.h against the weights region: use
 * once in a file that includes model_config.h. The build (CMake) checks the
 * same facts against model.bin itself. */
#define COLIBRI_ZEPHYR_CHECK_MODEL_FITS()                                                          \
    _Static_assert(COLIBRI_MODEL_IMAGE_SIZE <= COLIBRI_ZEPHYR_WEIGHTS_SIZE,                        \
                   "model image larger than the devicetree weights region");                       \
    _Static_assert(COLIBRI_ZEPHYR_WEIGHTS_ADDRESS % COLIBRI_MODEL_ALIGNMENT == 0,                  \
                   "weights address not a multiple of the model's alignment")

/* The weights region: base address and bytes. */
static inline const void *colibri_zephyr_weights(void)
{
    return (const void *)(uintptr_t)COLIBRI_ZEPHYR_WEIGHTS_ADDRESS;
}

static inline size_t colibri_zephyr_weights_size(void)
{
    return (size_t)COLIBRI_ZEPHYR_WEIGHTS_SIZE;
}

/*
 * The model image in a flash partition (CONFIG_COLIBRI_STORAGE; the chosen
 * property "colibri,storage", else the partition labelled colibri_storage):
 * for a board whose image is not in the address map, the routed experts
 * paged into the core's expert cache (docs/zephyr.md, "Experts from a flash
 * partition"). colibri_zephyr_storage_open: the partition's size, or a
 * negative errno. colibri_zephyr_storage_read is a colibri_read_fn (ctx
 * unused): 0, or flash_read's negative errno.
 */
int64_t colibri_zephyr_storage_open(void);
int colibri_zephyr_storage_read(void *ctx, uint64_t offset, void *dst, size_t size);

/* The A/B weight slots partition (CONFIG_COLIBRI_SLOTS): the node the chosen
 * property "colibri,slots" points at, else the node labelled colibri_slots. */
#if DT_HAS_CHOSEN(colibri_slots)
#define COLIBRI_ZEPHYR_SLOTS_NODE DT_CHOSEN(colibri_slots)
#elif DT_NODE_EXISTS(DT_NODELABEL(colibri_slots))
#define COLIBRI_ZEPHYR_SLOTS_NODE DT_NODELABEL(colibri_slots)
#endif

/*
 * A/B weight slots for over-the-air updates (docs/ota.md, CONFIG_COLIBRI_SLOTS):
 * the colibri_slots of the slots partition, laid out by the rule of
 * docs/ota.md section 1 (record copies in its first two erase sectors, then
 * slot A and slot B), read in place, written through the flash driver.
 * Images must be signed by trusted_key (32 bytes, kept by the caller), or
 * NULL: unsigned images are accepted too (development only). Returns NULL,
 * with a log message, when the flash is not ready or the partition cannot
 * hold two records and two slots. Call once, before using the slots.
 */
const colibri_slots *colibri_zephyr_slots(const uint8_t *trusted_key);

/* The key of the build's COLIBRI_TRUSTED_KEY (32 bytes), or NULL when it
 * names none (CONFIG_COLIBRI_SLOTS). */
const uint8_t *colibri_zephyr_trusted_key(void);

/* Cycles of the Zephyr system timer (k_cycle_get_64, or k_cycle_get_32
 * extended to 64 bits), monotonic. */
uint64_t colibri_zephyr_ticks(void);

/* Ticks per second of colibri_zephyr_ticks. */
uint64_t colibri_zephyr_ticks_hz(void);

/* What a tick is, for humans and the serial INFO reply. */
const char *colibri_zephyr_tick_unit(void);

/* A colibri_port with colibri_zephyr_ticks and no prefetch. */
const colibri_port *colibri_zephyr_port(void);

/*
 * Run fn(arg) once in interrupt context (a k_timer expiry handler, i.e. the
 * system clock interrupt) and return when it has finished; call from a
 * thread. stack_used (may be NULL) receives the interrupt stack bytes the
 * handler used, or 0 when that is not measured
 * (CONFIG_COLIBRI_IRQ_STACK_MEASURE). Returns 0, or -1 when
 * CONFIG_COLIBRI_IRQ_FORWARD is off or when called from an interrupt.
 */
int colibri_zephyr_run_in_interrupt(void (*fn)(void *arg), void *arg, size_t *stack_used);

/*
 * Interrupt stack measurement for code that raises its own interrupts:
 * paint the idle interrupt stack (call from a thread), let the interrupts
 * run, then read how many bytes of it were used since (an upper bound,
 * within 128 bytes). Both do nothing and the reading is 0 without
 * CONFIG_COLIBRI_IRQ_STACK_MEASURE.
 */
void colibri_zephyr_irq_stack_paint(void);
size_t colibri_zephyr_irq_stack_used(void);

#ifdef __cplusplus
}
#endif

#endif /* COLIBRI_ZEPHYR_H */
