/*
 * uart_stm32.c - STM32H7 USART/UART console, polled (RM0433).
 *
 * init enables the GPIO port and USART clocks in the RCC, puts the board's
 * TX/RX pins in their alternate function and programs 8N1 at config->baud
 * from config->clock_hz, the USART's kernel clock. This port leaves the
 * clock tree as reset makes it (HSI 64 MHz, no prescaler), where every
 * USART kernel clock (rcc_pclk1/rcc_pclk2) is 64 MHz. A baud of 0 (a board
 * file colibri-board refuses: docs/boards.md) programs STM32_FALLBACK_BAUD
 * rather than dividing by zero.
 * SoC facts (RCC, GPIO addresses, which enable bit clocks which USART) are
 * here; board facts (which USART, which pins) come from the board file.
 */
#include "cm_regs.h"
#include "cortex_m.h"

#define RCC_BASE 0x58024400u
#define RCC_AHB4ENR (RCC_BASE + 0x0E0u) /* GPIOAEN is bit 0, GPIOKEN bit 10 */
#define RCC_APB1LENR (RCC_BASE + 0x0E8u)
#define RCC_APB2ENR (RCC_BASE + 0x0F0u)

#define GPIO_BASE 0x58020000u /* GPIOA; port n at GPIO_BASE + n * 0x400 */
#define GPIO_STRIDE 0x400u
#define GPIO_MODER 0x00u
#define GPIO_OSPEEDR 0x08u
#define GPIO_PUPDR 0x0Cu
#define GPIO_AFRL 0x20u
#define MODER_ALTERNATE 0x2u
#define OSPEED_HIGH 0x2u
#define PUPD_PULL_UP 0x1u

#define USART_CR1 0x00u
#define USART_BRR 0x0Cu
#define USART_ISR 0x1Cu
#define USART_ICR 0x20u
#define USART_RDR 0x24u
#define USART_TDR 0x28u
#define CR1_UE 0x1u
#define CR1_RE 0x4u
#define CR1_TE 0x8u
#define ISR_ORE 0x8u
#define ISR_RXNE 0x20u
#define ISR_TXE 0x80u
#define ICR_ORECF 0x8u
#define STM32_FALLBACK_BAUD 115200u /* the board files' default */

typedef struct usart_clock {
    uint32_t base;
    uint32_t enable_register;
    uint32_t enable_bit;
} usart_clock;

static const usart_clock usart_clocks[] = {
    {0x40011000u, RCC_APB2ENR, 1u << 4},   /* USART1 */
    {0x40004400u, RCC_APB1LENR, 1u << 17}, /* USART2 */
    {0x40004800u, RCC_APB1LENR, 1u << 18}, /* USART3 */
    {0x40004C00u, RCC_APB1LENR, 1u << 19}, /* UART4 */
    {0x40005000u, RCC_APB1LENR, 1u << 20}, /* UART5 */
    {0x40011400u, RCC_APB2ENR, 1u << 5},   /* USART6 */
    {0x40007800u, RCC_APB1LENR, 1u << 30}, /* UART7 */
    {0x40007C00u, RCC_APB1LENR, 1u << 31}, /* UART8 */
};

static void enable_clock(uint32_t reg, uint32_t bit)
{
    CM_REG(reg) |= bit;
    (void)CM_REG(reg); /* read back: the clock is running before first use */
}

static void usart_clock_enable(uintptr_t base)
{
    for (size_t i = 0; i < sizeof usart_clocks / sizeof usart_clocks[0]; i++) {
        if (usart_clocks[i].base == base) {
            enable_clock(usart_clocks[i].enable_register, usart_clocks[i].enable_bit);
        }
    }
}

static void field_set(uintptr_t reg, uint32_t shift, uint32_t width_mask, uint32_t value)
{
    CM_REG(reg) = (CM_REG(reg) & ~(width_mask << shift)) | (value << shift);
}

static void pin_alternate(uint8_t port, uint8_t pin, uint8_t function, uint32_t pull)
{
    uintptr_t gpio = GPIO_BASE + GPIO_STRIDE * port;
    enable_clock(RCC_AHB4ENR, 1u << port);
    field_set(gpio + GPIO_AFRL + 4u * (pin / 8u), 4u * (pin % 8u), 0xFu, function);
    field_set(gpio + GPIO_OSPEEDR, 2u * pin, 0x3u, OSPEED_HIGH);
    field_set(gpio + GPIO_PUPDR, 2u * pin, 0x3u, pull);
    field_set(gpio + GPIO_MODER, 2u * pin, 0x3u, MODER_ALTERNATE);
}

static void stm32_init(const cm_uart_config *config)
{
    usart_clock_enable(config->base);
    pin_alternate(config->tx_port, config->tx_pin, config->alternate_function, 0);
    pin_alternate(config->rx_port, config->rx_pin, config->alternate_function, PUPD_PULL_UP);
    CM_REG(config->base + USART_CR1) = 0;
    uint32_t baud = config->baud != 0u ? config->baud : STM32_FALLBACK_BAUD;
    CM_REG(config->base + USART_BRR) = (config->clock_hz + baud / 2u) / baud;
    CM_REG(config->base + USART_CR1) = CR1_UE | CR1_RE | CR1_TE;
}

static void stm32_write_byte(uintptr_t base, uint8_t byte)
{
    while ((CM_REG(base + USART_ISR) & ISR_TXE) == 0u) {
    }
    CM_REG(base + USART_TDR) = byte;
}

static int stm32_read_byte(uintptr_t base)
{
    uint32_t status = CM_REG(base + USART_ISR);
    if ((status & ISR_ORE) != 0u) {
        CM_REG(base + USART_ICR) = ICR_ORECF; /* a lost byte must not stop reception */
    }
    if ((status & ISR_RXNE) == 0u) {
        return -1;
    }
    return (int)(CM_REG(base + USART_RDR) & 0xFFu);
}

const cm_uart_driver cm_uart_stm32 = {stm32_init, stm32_write_byte, stm32_read_byte};
