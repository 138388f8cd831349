/*
 * aarch64_port.h - what the AArch64 port tells beyond board.h.
 */
#ifndef COLIBRI_AARCH64_PORT_H
#define COLIBRI_AARCH64_PORT_H

#include <stdint.h>

/* Exception level the firmware was entered at (1 or 2), set by startup.S. */
extern uint32_t aarch64_entry_el;

/* One line for logs: "aarch64 EL1 (entered at EL2), MMU and caches on,
 * PMU cycle counter". Static storage; never NULL. */
const char *board_description(void);

#endif
