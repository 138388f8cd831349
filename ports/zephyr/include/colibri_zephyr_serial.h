/*
 * colibri_zephyr_serial.h - the Zephyr UART behind the serial protocol
 * runner (ports/serial/colibri_runner.h), with CONFIG_COLIBRI_SERIAL_RUNNER.
 *
 *   colibri_serial_io io;
 *   if (colibri_zephyr_serial_io(&io) == 0) {
 *       colibri_runner_init(&runner, &io, &cfg);
 *       colibri_runner_serve(&runner);
 *   }
 *
 * The UART is the devicetree's chosen "colibri,uart", else zephyr,console.
 * Received bytes are queued by the UART interrupt in a ring buffer of
 * CONFIG_COLIBRI_SERIAL_RX_BUFFER_SIZE bytes (polled when the driver has no
 * interrupt API); writes are blocking (uart_poll_out).
 */
#ifndef COLIBRI_ZEPHYR_SERIAL_H
#define COLIBRI_ZEPHYR_SERIAL_H

#include "colibri_proto.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fill *io: UART read/write, colibri_zephyr_run_in_interrupt (when
 * CONFIG_COLIBRI_IRQ_FORWARD is set, else NULL) and colibri_zephyr_ticks.
 * Returns 0, or -ENODEV if the UART is not ready. */
int colibri_zephyr_serial_io(colibri_serial_io *io);

/* Bytes dropped because the receive buffer was full (0 when polling). */
uint32_t colibri_zephyr_serial_dropped(void);

#ifdef __cplusplus
}
#endif

#endif /* COLIBRI_ZEPHYR_SERIAL_H */
