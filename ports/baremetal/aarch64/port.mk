# AArch64 bare-metal port (boards with port = "baremetal-aarch64"), included by
# ports/baremetal/firmware.mk. docs/port-aarch64.md describes the port.
#
# The compiler is the board's cross_prefix gcc (aarch64-linux-gnu-gcc on
# Debian): a Linux-targeted GCC used freestanding. Hence -fno-pie (it defaults
# to PIE), -mno-outline-atomics (their helpers need the OS's auxv), no
# unwind tables, -nostdinc (only GCC's freestanding headers and include/ of
# this port: glibc's headers, where installed, must not be used) and a link
# with -nostdlib against libgcc.a alone (the core has its own math).

AARCH64_PORT_DIR := ports/baremetal/aarch64

PORT_SRC := $(AARCH64_PORT_DIR)/startup.S $(AARCH64_PORT_DIR)/vectors.S \
            $(AARCH64_PORT_DIR)/interrupt_wait.S $(sort $(wildcard $(AARCH64_PORT_DIR)/*.c))
PORT_LD := $(AARCH64_PORT_DIR)/link.ld
PORT_CFLAGS := -fno-pie -mno-outline-atomics -fno-stack-protector \
               -fno-asynchronous-unwind-tables -fno-unwind-tables -fcallgraph-info=su \
               -nostdinc -isystem $(shell $(BOARD_CC) -print-file-name=include) \
               -isystem $(AARCH64_PORT_DIR)/include
PORT_LDFLAGS := -nostdlib -nostartfiles -static -no-pie -Wl,--build-id=none \
                -Wl,-z,noexecstack -Wl,--no-warn-rwx-segments
PORT_LIBS := -lgcc

AARCH64_OBJ_DIR := $(FW_DIR)/obj/$(AARCH64_PORT_DIR)

# Code that runs with the MMU off (every access is to Device memory, so no
# unaligned access) and must not touch FP/SIMD registers.
$(AARCH64_OBJ_DIR)/mmu.c.o $(AARCH64_OBJ_DIR)/semihosting.c.o: \
    FW_CFLAGS += -mgeneral-regs-only -mstrict-align
# mem* must not be compiled into calls to themselves.
$(AARCH64_OBJ_DIR)/libc_min.c.o: FW_CFLAGS += -fno-tree-loop-distribute-patterns

# Interrupt-controller facts from the board file, until board_config.h has them.
$(FW_DIR)/aarch64_board.h: boards/$(BOARD).toml tools/colibri_tools/board/port_aarch64.py \
                           tools/colibri_tools/board/boards.py
	@mkdir -p $(dir $@)
	@$(PY) -m colibri_tools.board.port_aarch64 $(BOARD) -o $@

$(patsubst %,$(FW_DIR)/obj/%.o,$(PORT_SRC)): $(FW_DIR)/aarch64_board.h \
    $(wildcard $(AARCH64_PORT_DIR)/*.h)
