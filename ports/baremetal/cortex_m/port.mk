# port.mk - the Cortex-M bare-metal port (Cortex-M7, Cortex-M55), included by
# ports/baremetal/firmware.mk after board.mk (BOARD_ARCH, BOARD_CFLAGS, ...).
#
#   make firmware BOARD=qemu_an547 APP=board_selftest_m MODEL_DIR=out/model
#
# Also generates cm_board_config.h (colibri_tools/board/port_cortex_m.py) beside board_config.h:
# the board facts only this port reads (clock set-up, UART driver and pins,
# caches, MPU guard, weight-window check, semihosting).

CM_DIR     := ports/baremetal/cortex_m
CM_MPU_SRC := $(if $(filter armv8.1-m,$(BOARD_ARCH)),$(CM_DIR)/mpu_v8m.c,$(CM_DIR)/mpu_v7m.c)

PORT_SRC := $(CM_DIR)/startup.S $(CM_DIR)/vectors.c $(CM_DIR)/board.c $(CM_DIR)/faults.c \
            $(CM_DIR)/clocks.c $(CM_DIR)/systick.c $(CM_DIR)/irq_job.c $(CM_DIR)/stacks.c \
            $(CM_DIR)/cache.c $(CM_MPU_SRC) $(CM_DIR)/uart_cmsdk.c $(CM_DIR)/uart_stm32.c \
            $(CM_DIR)/weights_ready.c $(CM_DIR)/semihost.c
PORT_LD  := $(CM_DIR)/link.ld
# .ci call graphs with stack sizes beside the .su files: the interrupt
# handler's worst-case stack is summed along them (docs/port-cortex-m.md).
PORT_CFLAGS  := -fcallgraph-info=su
PORT_LDFLAGS := -nostartfiles -Wl,--no-warn-rwx-segments
PORT_LIBS    := -Wl,--start-group -lc -lgcc -Wl,--end-group

CM_OBJ := $(patsubst %,$(FW_DIR)/obj/%.o,$(PORT_SRC) $(wildcard samples/baremetal/$(APP)/*.c))
$(CM_OBJ): $(FW_DIR)/cm_board_config.h $(wildcard $(CM_DIR)/*.h)

$(FW_DIR)/cm_board_config.h: boards/$(BOARD).toml tools/colibri_tools/board/port_cortex_m.py \
                             tools/colibri_tools/board/boards.py
	@mkdir -p $(dir $@)
	@$(PY) -m colibri_tools.board.port_cortex_m $(BOARD) -o $@
