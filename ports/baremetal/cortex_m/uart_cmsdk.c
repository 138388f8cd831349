/*
 * uart_cmsdk.c - the Arm CMSDK APB UART (MPS2 AN500, MPS3 AN547), polled.
 * Registers: DATA 0x00, STATE 0x04 (bit 0 TX buffer full, bit 1 RX buffer
 * full), CTRL 0x08 (bit 0 TX enable, bit 1 RX enable), BAUDDIV 0x10
 * (APB clock / baud rate, at least 16).
 */
#include "cm_regs.h"
#include "cortex_m.h"

#define CMSDK_DATA 0x00u
#define CMSDK_STATE 0x04u
#define CMSDK_CTRL 0x08u
#define CMSDK_BAUDDIV 0x10u

#define STATE_TX_FULL 0x1u
#define STATE_RX_FULL 0x2u
#define CTRL_TX_ENABLE 0x1u
#define CTRL_RX_ENABLE 0x2u
#define BAUDDIV_MIN 16u

static void cmsdk_init(const cm_uart_config *config)
{
    uint32_t divisor = config->baud != 0u ? config->clock_hz / config->baud : 0u;
    CM_REG(config->base + CMSDK_CTRL) = 0;
    CM_REG(config->base + CMSDK_BAUDDIV) = divisor < BAUDDIV_MIN ? BAUDDIV_MIN : divisor;
    CM_REG(config->base + CMSDK_CTRL) = CTRL_TX_ENABLE | CTRL_RX_ENABLE;
}

static void cmsdk_write_byte(uintptr_t base, uint8_t byte)
{
    while ((CM_REG(base + CMSDK_STATE) & STATE_TX_FULL) != 0u) {
    }
    CM_REG(base + CMSDK_DATA) = byte;
}

static int cmsdk_read_byte(uintptr_t base)
{
    if ((CM_REG(base + CMSDK_STATE) & STATE_RX_FULL) == 0u) {
        return -1;
    }
    return (int)(CM_REG(base + CMSDK_DATA) & 0xFFu);
}

const cm_uart_driver cm_uart_cmsdk = {cmsdk_init, cmsdk_write_byte, cmsdk_read_byte};
