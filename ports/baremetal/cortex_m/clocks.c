/*
 * clocks.c - bring the clock tree to the state the board file describes.
 *
 * The board file's [ticks] hz and [uart] clock_hz are the clocks after reset.
 * On the QEMU boards nothing can change them. On the STM32H7 a debugger may
 * have: OpenOCD's reset-init (board/stm32h747i-disco.cfg, stm32h750b-disco.cfg),
 * the step that also puts the QUADSPI in memory-mapped mode, runs the core
 * from PLL1 at 192 MHz with APB clocks at 96 MHz. cm_clocks_stm32h7_hsi64
 * returns to the reset state: HSI at 64 MHz (HSIDIV /1) as system clock and
 * every bus prescaler at /1, so the CPU, SysTick and all USART kernel clocks
 * run at 64 MHz. Slowing down is always safe: more flash wait states than
 * needed are harmless and the QUADSPI keeps its mapping at a lower clock.
 */
#include "cm_regs.h"
#include "cortex_m.h"

#define RCC_BASE 0x58024400u
#define RCC_CR (RCC_BASE + 0x000u)
#define RCC_CFGR (RCC_BASE + 0x010u)
#define RCC_D1CFGR (RCC_BASE + 0x018u)
#define RCC_D2CFGR (RCC_BASE + 0x01Cu)
#define RCC_D3CFGR (RCC_BASE + 0x020u)
#define CR_HSION 0x1u
#define CR_HSIRDY 0x4u
#define CR_HSIDIV_MASK (0x3u << 3)
#define CFGR_SW_MASK 0x7u
#define CFGR_SWS_SHIFT 3
#define CFGR_SW_HSI 0x0u

void cm_clocks_as_reset(void)
{
}

void cm_clocks_stm32h7_hsi64(void)
{
    CM_REG(RCC_CR) |= CR_HSION;
    while ((CM_REG(RCC_CR) & CR_HSIRDY) == 0u) {
    }
    CM_REG(RCC_CFGR) = (CM_REG(RCC_CFGR) & ~CFGR_SW_MASK) | CFGR_SW_HSI;
    while (((CM_REG(RCC_CFGR) >> CFGR_SWS_SHIFT) & 0x7u) != CFGR_SW_HSI) {
    }
    CM_REG(RCC_CR) &= ~CR_HSIDIV_MASK;
    while ((CM_REG(RCC_CR) & CR_HSIRDY) == 0u) {
    }
    CM_REG(RCC_D1CFGR) = 0;
    CM_REG(RCC_D2CFGR) = 0;
    CM_REG(RCC_D3CFGR) = 0;
    cm_dsb();
}
