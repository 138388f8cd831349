# tz.mk - the TrustZone-M split's two images (docs/trustzone.md), included by
# ports/baremetal/firmware.mk:
#
#   make firmware-tz BOARD=qemu_an547 MODEL_DIR=out/model TRUSTED_KEY=keys/release.pub
#
# builds the Secure image (samples/baremetal/tz_secure, with the core: `make
# firmware APP=tz_secure`, its app.mk adding the entries and the import
# library) and then the Non-secure one (NS_APP, default tz_app: its sources,
# ns_start.c and the console, linked with ns.ld against that import
# library): build/fw/BOARD/tz_secure/firmware.elf and build/fw/BOARD/NS_APP/ns.elf.
# QEMU: -kernel firmware.elf -device loader,file=ns.elf (and the signed image
# at the weight address).

NS_APP ?= tz_app
TZ_DIR := ports/baremetal/trustzone
TZ_SECURE_DIR := $(BUILD)/fw/$(BOARD)/tz_secure
TZ_PY := $(PY) -m colibri_tools.board.port_trustzone

.PHONY: firmware-tz firmware-ns
firmware-tz:
	$(MAKE) firmware APP=tz_secure BOARD=$(BOARD) MODEL_DIR=$(MODEL_DIR) BUILD=$(BUILD) \
	    TRUSTED_KEY=$(TRUSTED_KEY)
	$(MAKE) firmware-ns APP=$(NS_APP) BOARD=$(BOARD) MODEL_DIR=$(MODEL_DIR) BUILD=$(BUILD)

$(FW_DIR)/tz_config.h: boards/$(BOARD).toml tools/colibri_tools/board/port_trustzone.py
	@mkdir -p $(dir $@)
	@$(TZ_PY) header $(BOARD) -o $@
$(FW_DIR)/tz_secure.ld: boards/$(BOARD).toml tools/colibri_tools/board/port_trustzone.py
	@mkdir -p $(dir $@)
	@$(TZ_PY) ld-secure $(BOARD) -o $@
$(FW_DIR)/tz_ns_memory.ld: boards/$(BOARD).toml tools/colibri_tools/board/port_trustzone.py
	@mkdir -p $(dir $@)
	@$(TZ_PY) ld-ns $(BOARD) -o $@

# The Non-secure image: no core, no weights; the Secure entries by their veneers.
TZ_NS_SRC := $(TZ_DIR)/ns_start.c ports/baremetal/console.c $(wildcard samples/baremetal/$(APP)/*.c)
TZ_NS_OBJ := $(patsubst %,$(FW_DIR)/obj/%.o,$(TZ_NS_SRC))
ifneq ($(filter firmware-ns,$(MAKECMDGOALS)),)
$(TZ_NS_OBJ): FW_CFLAGS += -I$(TZ_DIR)
$(TZ_NS_OBJ): $(FW_DIR)/tz_config.h $(FW_DIR)/board_config.h
-include $(TZ_NS_OBJ:.o=.d)
endif

firmware-ns: $(FW_DIR)/ns.elf

$(FW_DIR)/ns.elf: $(TZ_NS_OBJ) $(FW_DIR)/tz_ns_memory.ld $(TZ_DIR)/ns.ld \
                  $(TZ_SECURE_DIR)/firmware.elf
	$(BOARD_CC) $(BOARD_CFLAGS) -nostartfiles -Wl,--no-warn-rwx-segments -L$(FW_DIR) \
	    -T$(TZ_DIR)/ns.ld -Wl,--gc-sections -Wl,-Map=$(FW_DIR)/ns.map $(TZ_NS_OBJ) \
	    $(TZ_SECURE_DIR)/secure_implib.o -o $@ -Wl,--start-group -lc -lgcc -Wl,--end-group
