/*
 * board.h - what a bare-metal board port gives a sample. One implementation
 * per port (ports/baremetal/aarch64, ports/baremetal/cortex_m); the board's
 * facts (addresses, clocks, UART) come from boards/<board>.toml through the
 * generated board_config.h, never from literals in the code.
 */
#ifndef COLIBRI_BOARD_H
#define COLIBRI_BOARD_H

#include <stddef.h>
#include <stdint.h>

#include "colibri.h"

/* Bring the board up: FPU (and MMU/caches on Cortex-A), UART, tick source,
 * interrupt controller. Called once, first thing in main(). */
void board_init(void);

/* Blocking write of n bytes to the console UART. */
void board_uart_write(const uint8_t *data, size_t n);

/* One byte from the console UART, or -1 if none arrived within timeout_ms
 * (0 = poll once). */
int board_uart_read(uint32_t timeout_ms);

/* Milliseconds since board_init, monotonic (for protocol timeouts). */
uint64_t board_millis(void);

/* The board's tick source (boards/<board>.toml [ticks]: what a tick is). */
uint64_t board_ticks(void);

/* A colibri_port using board_ticks (and prefetch where the board has one). */
const colibri_port *board_port(void);

/* The weight region: base address and size from the board file. */
const void *board_weights(void);
size_t board_weights_size(void);

/* The A/B weight slots (board file [slots], docs/ota.md) with the board's
 * flash driver, images to be signed by trusted_key (NULL: unsigned images
 * too); NULL when the board has no slots or no driver for their flash. */
const colibri_slots *board_slots(const uint8_t *trusted_key);

/* Run fn(arg) once from a timer interrupt handler and return after it has
 * finished (the caller sleeps with WFI meanwhile). Returns 0, or -1 when the
 * board has no timer interrupt. stack_used (optional) receives the bytes of
 * interrupt stack the handler used, measured by stack painting, or 0. */
int board_run_in_interrupt(void (*fn)(void *arg), void *arg, size_t *stack_used);

/* ---- storage: the model image where it is not in the address map ---------- */

/* Open the image file the emulator names (semihosting: the command line's
 * second word, semihosting_storage.c): its size in bytes, or -1 when there
 * is none (no semihosting host, no such argument, no such file). */
int64_t board_storage_open(void);

/* A colibri_read_fn (ctx unused): copy [offset, offset + size) of the opened
 * image to dst. 0, or one of these. */
#define BOARD_STORAGE_CLOSED (-1)   /* board_storage_open has not succeeded */
#define BOARD_STORAGE_PAST_END (-2) /* the range is not inside the file */
#define BOARD_STORAGE_IO (-3)       /* the host refused a seek or a read */
int board_storage_read(void *ctx, uint64_t offset, void *dst, size_t size);

/* The emulator command line's words after the program and the image path
 * (for a sample's run-time settings), "" if none; after board_storage_open. */
const char *board_args(void);

/* End the program: under QEMU (semihosting) exit with this status; on a
 * real board, stop in a low-power loop. */
void board_exit(int status) __attribute__((noreturn));

#endif
