/* gicv2.c - GICv2 driver (gicv2.h; GIC architecture spec v2, IHI 0048B). */
#include <stdint.h>

#include "gicv2.h"

#define GICD_CTLR 0x000u
#define GICD_TYPER 0x004u
#define GICD_ISENABLER 0x100u
#define GICD_ICENABLER 0x180u
#define GICD_ICPENDR 0x280u
#define GICD_IPRIORITYR 0x400u

#define GICC_CTLR 0x000u
#define GICC_PMR 0x004u
#define GICC_BPR 0x008u
#define GICC_IAR 0x00Cu
#define GICC_EOIR 0x010u

#define PRIORITY_DEFAULT 0xA0A0A0A0u /* four byte fields, mid priority */
#define PRIORITY_MASK_NONE 0xFFu

static volatile uint32_t *gic_reg(uintptr_t base, uint32_t offset)
{
    return (volatile uint32_t *)(base + offset);
}

void gicv2_init(uintptr_t dist, uintptr_t cpu)
{
    uint32_t groups = (*gic_reg(dist, GICD_TYPER) & 0x1Fu) + 1u; /* 32 INTIDs each */
    *gic_reg(dist, GICD_CTLR) = 0;
    *gic_reg(cpu, GICC_CTLR) = 0;
    for (uint32_t g = 0; g < groups; g++) {
        *gic_reg(dist, GICD_ICENABLER + 4u * g) = 0xFFFFFFFFu;
        *gic_reg(dist, GICD_ICPENDR + 4u * g) = 0xFFFFFFFFu;
    }
    for (uint32_t i = 0; i < groups * 32u; i += 4u) {
        *gic_reg(dist, GICD_IPRIORITYR + i) = PRIORITY_DEFAULT;
    }
    *gic_reg(cpu, GICC_PMR) = PRIORITY_MASK_NONE;
    *gic_reg(cpu, GICC_BPR) = 0;
    *gic_reg(cpu, GICC_CTLR) = 1u;
    *gic_reg(dist, GICD_CTLR) = 1u;
}

void gicv2_enable(uintptr_t dist, uint32_t intid)
{
    *gic_reg(dist, GICD_ISENABLER + 4u * (intid / 32u)) = 1u << (intid % 32u);
}

void gicv2_disable(uintptr_t dist, uint32_t intid)
{
    *gic_reg(dist, GICD_ICENABLER + 4u * (intid / 32u)) = 1u << (intid % 32u);
}

uint32_t gicv2_acknowledge(uintptr_t cpu)
{
    return *gic_reg(cpu, GICC_IAR);
}

void gicv2_end(uintptr_t cpu, uint32_t iar)
{
    *gic_reg(cpu, GICC_EOIR) = iar;
}
