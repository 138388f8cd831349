/*
 * colibri_zephyr_uart.c - colibri_serial_io on a Zephyr UART: the byte-level
 * seam of the serial protocol runner (ports/serial).
 */
#include <errno.h>

#include <zephyr/device.h>
#include <zephyr/drivers/uart.h>
#include <zephyr/kernel.h>
#include <zephyr/sys/ring_buffer.h>

#include "colibri_zephyr.h"
#include "colibri_zephyr_serial.h"

#if DT_HAS_CHOSEN(colibri_uart)
#define COLIBRI_UART_NODE DT_CHOSEN(colibri_uart)
#else
#define COLIBRI_UART_NODE DT_CHOSEN(zephyr_console)
#endif

BUILD_ASSERT(CONFIG_COLIBRI_SERIAL_RX_BUFFER_SIZE >= COLIBRI_PROTO_MAX_FRAME,
             "CONFIG_COLIBRI_SERIAL_RX_BUFFER_SIZE must hold one whole frame");

static const struct device *const uart = DEVICE_DT_GET(COLIBRI_UART_NODE);

static void uart_write_bytes(void *ctx, const uint8_t *data, size_t n)
{
    (void)ctx;
    for (size_t i = 0; i < n; i++) {
        uart_poll_out(uart, data[i]);
    }
}

#ifdef CONFIG_UART_INTERRUPT_DRIVEN

RING_BUF_DECLARE(rx_ring, CONFIG_COLIBRI_SERIAL_RX_BUFFER_SIZE);
static K_SEM_DEFINE(rx_ready, 0, 1);
static uint32_t rx_dropped;

static void uart_rx_isr(const struct device *dev, void *user_data)
{
    (void)user_data;
    uint8_t chunk[32];
    int n;
    if (!uart_irq_update(dev) || !uart_irq_rx_ready(dev)) {
        return;
    }
    while ((n = uart_fifo_read(dev, chunk, sizeof chunk)) > 0) {
        rx_dropped += (uint32_t)n - ring_buf_put(&rx_ring, chunk, (uint32_t)n);
    }
    k_sem_give(&rx_ready);
}

static int ring_get_byte(void)
{
    uint8_t byte;
    unsigned int key = irq_lock();
    uint32_t got = ring_buf_get(&rx_ring, &byte, 1);
    irq_unlock(key);
    return got == 1 ? byte : -1;
}

static int uart_read_byte(void *ctx, uint32_t timeout_ms)
{
    (void)ctx;
    k_timepoint_t deadline = sys_timepoint_calc(K_MSEC(timeout_ms));
    for (;;) {
        int byte = ring_get_byte();
        if (byte >= 0) {
            return byte;
        }
        if (sys_timepoint_expired(deadline) ||
            k_sem_take(&rx_ready, sys_timepoint_timeout(deadline)) != 0) {
            return ring_get_byte();
        }
    }
}

/* Bytes that arrived before the receive interrupt was enabled: some UARTs
 * (QEMU's CMSDK APB UART, for one) raise the interrupt only for bytes that
 * arrive while it is enabled, and hold the next byte back until this one is
 * read. Read them into the ring buffer once, with interrupts locked. */
static void uart_drain_pending(void)
{
    unsigned char byte;
    unsigned int key = irq_lock();
    while (uart_poll_in(uart, &byte) == 0) {
        rx_dropped += 1u - ring_buf_put(&rx_ring, &byte, 1);
    }
    irq_unlock(key);
}

static int uart_start(void)
{
    int rc = uart_irq_callback_user_data_set(uart, uart_rx_isr, NULL);
    if (rc != 0) {
        return rc;
    }
    uart_irq_rx_enable(uart);
    uart_drain_pending();
    return 0;
}

uint32_t colibri_zephyr_serial_dropped(void)
{
    return rx_dropped;
}

#else /* polled UART */

static int uart_read_byte(void *ctx, uint32_t timeout_ms)
{
    (void)ctx;
    k_timepoint_t deadline = sys_timepoint_calc(K_MSEC(timeout_ms));
    unsigned char byte;
    while (uart_poll_in(uart, &byte) != 0) {
        if (sys_timepoint_expired(deadline)) {
            return -1;
        }
        k_yield();
    }
    return byte;
}

static int uart_start(void)
{
    return 0;
}

uint32_t colibri_zephyr_serial_dropped(void)
{
    return 0;
}

#endif

static int serial_run_in_interrupt(void *ctx, void (*fn)(void *arg), void *arg, size_t *stack_used)
{
    (void)ctx;
    return colibri_zephyr_run_in_interrupt(fn, arg, stack_used);
}

int colibri_zephyr_serial_io(colibri_serial_io *io)
{
    if (!device_is_ready(uart) || uart_start() != 0) {
        return -ENODEV;
    }
    io->read_byte = uart_read_byte;
    io->write = uart_write_bytes;
    io->run_in_interrupt = IS_ENABLED(CONFIG_COLIBRI_IRQ_FORWARD) ? serial_run_in_interrupt : NULL;
    io->ctx = NULL;
    return 0;
}
