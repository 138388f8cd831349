# Bare-metal firmware build, included by the top-level Makefile.
#
#   make firmware BOARD=qemu_virt_a72 APP=serial_runner MODEL_DIR=out/model
#
# MODEL_DIR is required. Before compiling, colibri-board fit checks that the
# model fits the board (weights and RAM) and stops with the numbers if not.
#
# Board facts come from boards/$(BOARD).toml through colibri-board (compiler,
# flags, linker MEMORY, board_config.h). The app is samples/baremetal/$(APP);
# MODEL_DIR holds the model_config.h written by colibri-convert.
# Outputs in build/fw/$(BOARD)/$(APP): firmware.elf, firmware.bin, firmware.hex,
# firmware.map, size.txt, *.su (stack usage).

BOARD     ?= qemu_virt_a72
APP       ?= serial_runner
FW_DIR    := $(BUILD)/fw/$(BOARD)/$(APP)
BOARD_PY  := $(PY) -m colibri_tools.board.board_cli

ifneq ($(filter firmware firmware-%,$(MAKECMDGOALS)),)
# The model comes first: without it nothing else can be built, and a stale
# build must not pass for this model's firmware.
ifeq ($(strip $(MODEL_DIR)),)
$(error make firmware needs MODEL_DIR: the folder colibri-convert wrote (model.bin, \
    model_config.h), e.g. make firmware BOARD=$(BOARD) APP=$(APP) MODEL_DIR=out/model)
endif
ifeq ($(wildcard $(MODEL_DIR)/model_config.h),)
$(error MODEL_DIR=$(MODEL_DIR) has no model_config.h: convert a model there first \
    (colibri-convert HF_DIR -o $(MODEL_DIR)) or point MODEL_DIR at a converted model)
endif
$(FW_DIR)/board.mk: boards/$(BOARD).toml tools/colibri_tools/board/boards.py
	@mkdir -p $(FW_DIR)
	@$(BOARD_PY) make $(BOARD) -o $@
include $(FW_DIR)/board.mk
ifeq ($(filter baremetal-% ,$(BOARD_PORT) ),)
ifneq ($(BOARD_PORT),)
$(error board '$(BOARD)' runs the $(BOARD_PORT) port, not bare metal: build its firmware with \
    that port (linux boards: make linux-cross BOARD=$(BOARD); zephyr: west build))
endif
endif
# The expert cache a paging sample (samples/baremetal/paged_moe) compiles in:
# EXPERT_CACHE_SLOTS=N, else the most slots the board's RAM holds beside the
# rest (colibri-board fit --cache-slots; 0 for the other samples).
ifeq ($(origin EXPERT_CACHE_SLOTS),undefined)
EXPERT_CACHE_SLOTS := $(shell $(BOARD_PY) fit $(BOARD) $(MODEL_DIR) --app $(APP) --cache-slots \
                        2>/dev/null || echo 0)
endif
# Rebuild when MODEL_DIR points at another model, even one whose
# model_config.h is older than the objects: the stamp changes with its content.
FW_MODEL_STAMP := $(FW_DIR)/model.stamp
FW_MODEL_ID := $(shell cat $(MODEL_DIR)/model_config.h 2>/dev/null | cksum) $(EXPERT_CACHE_SLOTS)
ifneq ($(FW_MODEL_ID),$(shell cat $(FW_MODEL_STAMP) 2>/dev/null))
$(shell mkdir -p $(FW_DIR) && echo '$(FW_MODEL_ID)' > $(FW_MODEL_STAMP))
endif
endif

# Each port directory provides port.mk: PORT_SRC (C and .S files), PORT_LD
# (linker script that INCLUDEs memory.ld), PORT_CFLAGS, PORT_LDFLAGS.
PORT_DIR := ports/baremetal/$(patsubst baremetal-%,%,$(BOARD_PORT))
PORT_DIR := $(subst cortex-m,cortex_m,$(PORT_DIR))
-include $(PORT_DIR)/port.mk
# An app may add to the port's sources and flags, or bring its own linker
# script (samples/baremetal/tz_secure/app.mk: the TrustZone-M Secure image).
-include samples/baremetal/$(APP)/app.mk

FW_SRC := $(CORE_SRC) $(call kernel_src,$(BOARD_KERNELS)) $(wildcard ports/serial/*.c ports/baremetal/*.c) $(PORT_SRC) \
          $(wildcard samples/baremetal/$(APP)/*.c)
FW_OBJ := $(patsubst %,$(FW_DIR)/obj/%.o,$(FW_SRC))
FW_APP_OBJ := $(patsubst %,$(FW_DIR)/obj/%.o,$(wildcard samples/baremetal/$(APP)/*.c))
# The board's first kernel table (or the reference) is the one its port gives
# the core; `make firmware BOARD_KERNELS=` builds the reference-only firmware.
FW_KERNELS := $(firstword $(BOARD_KERNELS) reference)
FW_CFLAGS := $(BOARD_CFLAGS) $(PORT_CFLAGS) -std=c11 -Wall -Wextra -Werror $(FP_STRICT) -O2 -g \
             -ffreestanding -ffunction-sections -fdata-sections -fstack-usage -MD -MP \
             -Isdk/include -Isdk/src -Iports/baremetal -I$(PORT_DIR) -Iports/serial \
             -I$(FW_DIR) -I$(MODEL_DIR) '-DCOLIBRI_BOARD_KERNELS=(&colibri_kernels_$(FW_KERNELS))' \
             -DCOLIBRI_EXPERT_CACHE_SLOTS=$(EXPERT_CACHE_SLOTS)u

# The Ed25519 key A/B slot images must be signed with (docs/ota.md):
# TRUSTED_KEY=keys/release.pub, or none (unsigned images accepted).
TRUSTED_KEY ?= none
FW_KEY_STAMP := $(FW_DIR)/trusted_key.stamp
FW_KEY_ID := $(TRUSTED_KEY) $(shell cat $(TRUSTED_KEY) 2>/dev/null | cksum)
ifneq ($(FW_KEY_ID),$(shell cat $(FW_KEY_STAMP) 2>/dev/null))
$(shell mkdir -p $(FW_DIR) && echo '$(FW_KEY_ID)' > $(FW_KEY_STAMP))
endif
$(FW_DIR)/colibri_trusted_key.h: $(FW_KEY_STAMP) tools/colibri_tools/image/signing.py
	@mkdir -p $(dir $@)
	@$(PY) -m colibri_tools.image.signing header $(TRUSTED_KEY) -o $@

.PHONY: firmware
firmware: $(FW_DIR)/firmware.elf $(FW_DIR)/firmware.bin $(FW_DIR)/firmware.hex $(FW_DIR)/size.txt

$(FW_DIR)/board_config.h: boards/$(BOARD).toml tools/colibri_tools/board/boards.py
	@mkdir -p $(dir $@)
	@$(BOARD_PY) header $(BOARD) -o $@

$(FW_DIR)/memory.ld: boards/$(BOARD).toml tools/colibri_tools/board/boards.py
	@mkdir -p $(dir $@)
	@$(BOARD_PY) ld $(BOARD) -o $@

# Before anything is compiled: does the model fit the board (image in the
# weight region, the app's buffers + stacks + firmware in RAM)? The same
# numbers as `colibri-board fit` (colibri_tools/board/fit.py).
$(FW_DIR)/fit.ok: boards/$(BOARD).toml $(MODEL_DIR)/model_config.h $(FW_MODEL_STAMP)
	@mkdir -p $(dir $@)
	@$(BOARD_PY) fit $(BOARD) $(MODEL_DIR) --app $(APP) --check
	@touch $@

$(FW_DIR)/obj/%.o: % $(FW_DIR)/board_config.h $(FW_DIR)/colibri_trusted_key.h | $(FW_DIR)/fit.ok
	@mkdir -p $(dir $@)
	$(BOARD_CC) $(FW_CFLAGS) -c $< -o $@

# Only the app includes model_config.h (and reads EXPERT_CACHE_SLOTS): another
# model recompiles the app alone, the core and the port objects stay.
$(FW_APP_OBJ): $(MODEL_DIR)/model_config.h $(FW_MODEL_STAMP)

$(FW_DIR)/firmware.elf: $(FW_OBJ) $(FW_DIR)/memory.ld $(PORT_LD)
	$(BOARD_CC) $(BOARD_CFLAGS) $(PORT_LDFLAGS) $(BOARD_LDFLAGS) -L$(FW_DIR) -T$(PORT_LD) \
	    -Wl,--gc-sections -Wl,-Map=$(FW_DIR)/firmware.map $(FW_OBJ) -o $@ $(PORT_LIBS)

-include $(FW_OBJ:.o=.d)

$(FW_DIR)/firmware.bin: $(FW_DIR)/firmware.elf
	$(BOARD_OBJCOPY) -O binary $< $@

$(FW_DIR)/firmware.hex: $(FW_DIR)/firmware.elf
	$(BOARD_OBJCOPY) -O ihex $< $@

$(FW_DIR)/size.txt: $(FW_DIR)/firmware.elf
	$(BOARD_SIZE) -A $< > $@

include ports/baremetal/trustzone/tz.mk
