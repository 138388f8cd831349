/*
 * weights_ready.c - can the weight window be read now?
 *
 * On the STM32H7 the weights are in external NOR flash behind the QUADSPI,
 * readable at 0x90000000 only in memory-mapped mode. This port does not
 * drive the QUADSPI: something before colibri_init must map it (OpenOCD's
 * reset-init with board/stm32h747i-disco.cfg or stm32h750b-disco.cfg does;
 * standalone, a bootloader or the application's own QSPI set-up must). A
 * read while it is not mapped is a bus fault, so board.c asks first and
 * reports an empty weight region instead (docs/port-cortex-m.md).
 */
#include "cm_regs.h"
#include "cortex_m.h"

#define RCC_AHB3ENR 0x580244D4u
#define RCC_AHB3ENR_QSPIEN (1u << 14)
#define QUADSPI_CR 0x52005000u
#define QUADSPI_CCR 0x52005014u
#define QUADSPI_CR_EN 0x1u
#define QUADSPI_CCR_FMODE_SHIFT 26
#define QUADSPI_FMODE_MEMORY_MAPPED 0x3u

int cm_weights_always_ready(void)
{
    return 1;
}

int cm_weights_stm32h7_quadspi_mapped(void)
{
    if ((CM_REG(RCC_AHB3ENR) & RCC_AHB3ENR_QSPIEN) == 0u) {
        return 0; /* QUADSPI unclocked: its registers read as 0 anyway */
    }
    uint32_t fmode = (CM_REG(QUADSPI_CCR) >> QUADSPI_CCR_FMODE_SHIFT) & 0x3u;
    return (CM_REG(QUADSPI_CR) & QUADSPI_CR_EN) != 0u && fmode == QUADSPI_FMODE_MEMORY_MAPPED;
}
