# The serial protocol runner (ports/serial) on Linux, included by the top-level
# Makefile after its host/asan rules.
#
#   make build/host/serial_runner     the runner on a TCP port, stdin/stdout or a pty
#   make build/asan/serial_runner     the same with AddressSanitizer + UBSan
#   make serial-cross                 ports/serial objects for aarch64 and a
#                                     freestanding Cortex-M7 (proves they are clean)
#   make build/fuzz/fuzz_serial_runner  libFuzzer target of the device side (clang)
#
# Safe to include twice.
ifndef COLIBRI_SERIAL_MK
COLIBRI_SERIAL_MK := 1

SERIAL_SRC    := $(sort $(wildcard ports/serial/*.c))
SERIAL_HDR    := $(wildcard ports/serial/*.h)
SERIAL_APP    := samples/linux/serial_runner.c
SERIAL_LINUX  := $(sort $(wildcard ports/linux/colibri_linux*.c)) ports/linux/colibri_serial_linux.c

SERIAL_HOST_OBJ := $(patsubst %.c,$(BUILD)/host/%.o,$(SERIAL_SRC) $(SERIAL_APP) $(SERIAL_LINUX))
SERIAL_ASAN_OBJ := $(patsubst %.c,$(BUILD)/asan/%.o,$(SERIAL_SRC) $(SERIAL_APP) $(SERIAL_LINUX))

$(SERIAL_HOST_OBJ): HOST_CFLAGS += -Iports/serial -Iports/linux
$(SERIAL_ASAN_OBJ): ASAN_CFLAGS += -Iports/serial -Iports/linux
$(SERIAL_HOST_OBJ) $(SERIAL_ASAN_OBJ): $(SERIAL_HDR)

$(BUILD)/host/serial_runner: $(SERIAL_HOST_OBJ) $(BUILD)/host/libcolibri.a
	$(CC) -o $@ $^

$(BUILD)/asan/serial_runner: $(SERIAL_ASAN_OBJ) $(BUILD)/asan/libcolibri.a
	$(CC) -fsanitize=address,undefined -o $@ $^

# Cross objects of ports/serial alone (no libc beyond memcpy/memset).
SERIAL_CROSS_OBJ := $(patsubst %.c,$(BUILD)/aarch64/%.o,$(SERIAL_SRC)) \
                    $(patsubst %.c,$(BUILD)/freestanding/%.o,$(SERIAL_SRC))
$(SERIAL_CROSS_OBJ): CORE_INC += -Iports/serial
$(SERIAL_CROSS_OBJ): $(SERIAL_HDR)

# libFuzzer target: the byte stream a host sends, into the runner.
# The core's objects are the loader fuzzer's (Makefile, FUZZ_SDK_OBJ).
SERIAL_FUZZ_OBJ := $(patsubst %.c,$(BUILD)/fuzz/%.o,$(SERIAL_SRC))
$(SERIAL_FUZZ_OBJ): FUZZ_CFLAGS += -Iports/serial
$(SERIAL_FUZZ_OBJ): $(SERIAL_HDR)
$(BUILD)/fuzz/fuzz_serial_runner: tests/serial/fuzz_serial_runner.c $(SERIAL_FUZZ_OBJ) $(FUZZ_SDK_OBJ) \
        $(SERIAL_HDR)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -Iports/serial -fsanitize=fuzzer,address,undefined \
	    $(filter-out %.h,$^) -o $@

.PHONY: serial-cross serial
serial: $(BUILD)/host/serial_runner $(BUILD)/asan/serial_runner
serial-cross: $(SERIAL_CROSS_OBJ)

endif
