# app.mk - what the Secure image of the TrustZone-M split adds to the
# Cortex-M port's firmware build (ports/baremetal/firmware.mk includes it):
# the Secure entries, -mcmse, its linker script and the import library the
# Non-secure image links against (ports/baremetal/trustzone/tz.mk).
TZ_DIR := ports/baremetal/trustzone
PORT_SRC += $(TZ_DIR)/tz_secure.c $(TZ_DIR)/tz_entry.c
PORT_LD := $(TZ_DIR)/secure.ld
PORT_CFLAGS += -mcmse -I$(TZ_DIR)
PORT_LDFLAGS += -L$(CM_DIR) -Wl,--cmse-implib -Wl,--out-implib=$(FW_DIR)/secure_implib.o
$(patsubst %,$(FW_DIR)/obj/%.o,$(TZ_DIR)/tz_secure.c $(TZ_DIR)/tz_entry.c): $(FW_DIR)/tz_config.h \
    $(FW_DIR)/cm_board_config.h
$(FW_DIR)/firmware.elf: $(FW_DIR)/tz_secure.ld
