# Cross builds of colibri-run for Linux boards (boards/*.toml with
# port = "linux"), included by the top-level Makefile:
#
#   make linux-cross BOARD=rpi4              build/linux-cross/rpi4/colibri-run
#   make linux-cross BOARD=jetson_orin_nano  build/linux-cross/jetson_orin_nano/colibri-run
#
# Compiler, -mcpu/-mtune and link flags come from the board file through
# colibri-board; everything else is the host build's: strict C11, no
# floating-point contraction, -O2. The boards link statically (ldflags), so
# the binary carries the libm it was tested with. docs/port-aarch64.md.

LINUX_CROSS_DIR := $(BUILD)/linux-cross/$(BOARD)
LINUX_CROSS_BOARD_PY = $(PY) -m colibri_tools.board.board_cli

ifneq ($(filter linux-cross,$(MAKECMDGOALS)),)
$(LINUX_CROSS_DIR)/board.mk: boards/$(BOARD).toml tools/colibri_tools/board/boards.py
	@mkdir -p $(dir $@)
	@$(LINUX_CROSS_BOARD_PY) make $(BOARD) -o $@
include $(LINUX_CROSS_DIR)/board.mk
endif

LINUX_CROSS_CFLAGS = $(WARN) $(FP_STRICT) -O2 -g $(BOARD_CFLAGS) $(CORE_INC) -Iports/linux
LINUX_CROSS_SRC = $(CORE_SRC) $(call kernel_src,$(BOARD_KERNELS)) $(LINUX_SRC) $(RUN_SRC)
LINUX_CROSS_OBJ = $(patsubst %.c,$(LINUX_CROSS_DIR)/%.o,$(LINUX_CROSS_SRC))

.PHONY: linux-cross linux-cross-board-check
linux-cross: $(LINUX_CROSS_DIR)/colibri-run

linux-cross-board-check:
	@test "$(BOARD_PORT)" = linux || { echo "linux-cross: board '$(BOARD)' has port" \
	    "'$(BOARD_PORT)', not linux (try BOARD=rpi4 or BOARD=jetson_orin_nano)" >&2; exit 1; }

$(LINUX_CROSS_DIR)/%.o: %.c $(LINUX_CROSS_DIR)/board.mk \
        $(CORE_HDR) $(wildcard ports/linux/*.h) \
        | linux-cross-board-check
	@mkdir -p $(dir $@)
	$(BOARD_CC) $(LINUX_CROSS_CFLAGS) -c $< -o $@

# The port's CPU probe chooses among the board's tables (board.mk changes
# with them, and every object depends on it).
$(LINUX_CROSS_DIR)/ports/linux/colibri_linux_kernels.o: \
    LINUX_CROSS_CFLAGS += '-DCOLIBRI_LINUX_KERNEL_TABLES=$(call kernel_tables,$(BOARD_KERNELS))'

$(LINUX_CROSS_DIR)/colibri-run: $(LINUX_CROSS_OBJ)
	$(BOARD_CC) -pthread $(BOARD_CFLAGS) $(BOARD_LDFLAGS) -o $@ $^
