# Colibri build. `make` builds the host library and tools into build/host.
# Other flavours: `make asan` (AddressSanitizer + UBSan), `make cross`
# (aarch64-linux-gnu and Cortex-M7 objects of the core), `make freestanding`.

CC        ?= cc
BUILD     ?= build
PY        ?= $(if $(wildcard .venv/bin/python),.venv/bin/python,python3)

# Strict, portable C11; no floating-point contraction (determinism contract).
WARN      := -std=c11 -Wall -Wextra -Wpedantic -Werror -Wshadow -Wstrict-prototypes \
             -Wmissing-prototypes -Wcast-align -Wvla
FP_STRICT := -ffp-contract=off -fno-fast-math
OPT       ?= -O2
CORE_INC  := -Isdk/include -Isdk/src

# Kernel tables built into the core (sdk/src/kernels/tables.mk: each table's
# files, the first defining colibri_kernels_<name>), most preferred first; the
# reference is always built, and is the last choice. The host default follows
# what cc targets.
HOST_MACHINE := $(shell $(CC) -dumpmachine)
KERNELS   ?= $(if $(findstring x86_64,$(HOST_MACHINE)),avx512vnni avx512 avx2,$(if $(findstring aarch64,$(HOST_MACHINE)),neon))
AARCH64_KERNELS ?= neondot neon
# The model (sdk/src), A/B weight slots and signed images (ota/) and their
# crypto (crypto/); the Zephyr module builds the last two only with slots.
CORE_SRC  := $(sort $(wildcard sdk/src/*.c sdk/src/ota/*.c sdk/src/crypto/*.c))
CORE_HDR  := $(wildcard sdk/include/*.h sdk/src/*.h sdk/src/*/*.h sdk/src/kernels/*/*.h)
include sdk/src/kernels/tables.mk
kernel_list = $(filter-out reference,$(1)) reference
kernel_files = $(if $(KERNEL_SOURCES_$(1)),$(KERNEL_SOURCES_$(1)),$(error no kernel table '$(1)' in sdk/src/kernels/tables.mk))
kernel_src = $(addprefix sdk/src/kernels/,$(sort $(foreach k,$(call kernel_list,$(1)),$(call kernel_files,$(k)))))
# "&colibri_kernels_a,&colibri_kernels_b,...,&colibri_kernels_reference,"
kernel_tables = $(foreach k,$(call kernel_list,$(1)),&colibri_kernels_$(k),)
SDK_SRC   := $(CORE_SRC) $(call kernel_src,$(KERNELS))
KERNEL_TABLES := $(call kernel_tables,$(KERNELS))
LINUX_SRC := $(sort $(wildcard ports/linux/colibri_linux*.c))
RUN_SRC   := ports/linux/colibri_run.c ports/linux/colibri_run_options.c ports/linux/colibri_run_stats.c \
             ports/linux/colibri_run_experts.c ports/linux/colibri_run_slot.c

# The Linux port's CPU probe gets the same list (ports/linux/colibri_linux_kernels.c);
# a stamp rebuilds it when KERNELS changes.
KERNELS_STAMP := $(BUILD)/kernels.stamp
ifneq ($(KERNEL_TABLES),$(shell cat $(KERNELS_STAMP) 2>/dev/null))
$(shell mkdir -p $(BUILD) && echo '$(KERNEL_TABLES)' > $(KERNELS_STAMP))
endif
LINUX_KERNELS_FLAG = '-DCOLIBRI_LINUX_KERNEL_TABLES=$(KERNEL_TABLES)'
$(BUILD)/host/ports/linux/colibri_linux_kernels.o $(BUILD)/asan/ports/linux/colibri_linux_kernels.o: \
    $(KERNELS_STAMP)
$(BUILD)/host/ports/linux/colibri_linux_kernels.o: HOST_CFLAGS += $(LINUX_KERNELS_FLAG)
$(BUILD)/asan/ports/linux/colibri_linux_kernels.o: ASAN_CFLAGS += $(LINUX_KERNELS_FLAG)

.PHONY: all host asan cross freestanding size clean test-bins fuzz shared install
all: host

# Objects of the core for flavour $(1) with the kernel tables $(2) (default: KERNELS).
define core_objs
$(patsubst %.c,$(BUILD)/$(1)/%.o,$(CORE_SRC) $(call kernel_src,$(if $(2),$(2),$(KERNELS))))
endef

# ---- host (x86-64 or whatever cc targets) --------------------------------
HOST_CFLAGS := $(WARN) $(FP_STRICT) $(OPT) -g -fPIC $(CORE_INC)
host: $(BUILD)/host/libcolibri.a $(BUILD)/host/libcolibri.so $(BUILD)/host/colibri-run \
      $(BUILD)/host/colibri-membw $(BUILD)/host/libcolibri_linux.so $(BUILD)/host/libcolibri_linux.a \
      $(BUILD)/host/colibri-slot

# What the Python package's wheel carries (setup.py): the two shared libraries.
shared: $(BUILD)/host/libcolibri.so $(BUILD)/host/libcolibri_linux.so

$(BUILD)/host/%.o: %.c $(CORE_HDR) $(wildcard ports/linux/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(HOST_CFLAGS) -Iports/linux -c $< -o $@

$(BUILD)/host/libcolibri.a: $(call core_objs,host)
	rm -f $@ && $(AR) rcs $@ $^

# Shared libraries (docs/install.md): the core, and the Linux port, which
# finds the core beside itself ($$ORIGIN). Their version is colibri.h's.
COLIBRI_VERSION := $(shell sed -n 's/^\#define COLIBRI_VERSION_[A-Z]* \([0-9][0-9]*\)$$/\1/p' \
                     sdk/include/colibri.h | paste -sd. -)
SO_MAJOR  := $(firstword $(subst ., ,$(COLIBRI_VERSION)))
LINUX_OBJ  = $(patsubst %.c,$(BUILD)/host/%.o,$(LINUX_SRC))

$(BUILD)/host/libcolibri.so: $(call core_objs,host)
	$(CC) -shared -Wl,-soname,libcolibri.so.$(SO_MAJOR) -o $@ $^
	ln -sf libcolibri.so $@.$(SO_MAJOR)

$(BUILD)/host/libcolibri_linux.so: $(LINUX_OBJ) $(BUILD)/host/libcolibri.so
	$(CC) -shared -Wl,-soname,libcolibri_linux.so.$(SO_MAJOR) -Wl,-rpath,'$$ORIGIN' -o $@ \
	    $(LINUX_OBJ) -L$(BUILD)/host -lcolibri -pthread
	ln -sf libcolibri_linux.so $@.$(SO_MAJOR)

$(BUILD)/host/libcolibri_linux.a: $(LINUX_OBJ)
	rm -f $@ && $(AR) rcs $@ $^

$(BUILD)/host/colibri-run: $(patsubst %.c,$(BUILD)/host/%.o,$(RUN_SRC) $(LINUX_SRC)) $(BUILD)/host/libcolibri.a
	$(CC) -pthread -o $@ $^

# A/B weight slots in a file (docs/ota.md).
$(BUILD)/host/colibri-slot: $(BUILD)/host/ports/linux/colibri_slot.o $(patsubst %.c,$(BUILD)/host/%.o,$(LINUX_SRC)) \
        $(BUILD)/host/libcolibri.a
	$(CC) -pthread -o $@ $^

# Power cuts for the Linux slot tests: SIGKILL at the k-th pwrite (LD_PRELOAD).
$(BUILD)/host/cut_writes.so: tests/ports/linux/cut_writes.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -Wall -Wextra -Werror -O2 -shared -fPIC $< -o $@ -ldl

# colibri-bench's memory bandwidth probe (a measuring tool, not the core:
# built for this CPU, as fast as the compiler makes it).
$(BUILD)/host/colibri-membw: bench/colibri_membw.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -Wall -Wextra -Werror -O3 -march=native -pthread $< -o $@

# colibri-bench --emulate's instruction counter: a QEMU TCG plugin
# (qemu-aarch64 / qemu-system-arm -plugin build/host/qemu-insn.so,out=FILE).
$(BUILD)/host/qemu-insn.so: bench/qemu_insn.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -Wall -Wextra -Werror -O2 -shared -fPIC -fvisibility=hidden $< -o $@

# Speed of the quantized products of every table this CPU runs
# (docs/kernels.md): the core as the library is built, one thread.
$(BUILD)/host/colibri-qbench: $(BUILD)/host/bench/colibri_qbench.o \
        $(BUILD)/host/libcolibri_linux.a $(BUILD)/host/libcolibri.a
	$(CC) -pthread -o $@ $^

# The same on a Cortex-M QEMU board, in instructions (SysTick under -icount):
#   make qbench-m BOARD=qemu_an547   -> build/qbench/qemu_an547/colibri-qbench.elf
# (bench/colibri_qbench_m.c; the bare-metal start of the kernel test).
QBENCH_M_DIR := $(BUILD)/qbench/$(BOARD)
QBENCH_M_START := tests/ports/cortex_m/kernels_m
.PHONY: qbench-m
qbench-m: $(QBENCH_M_DIR)/colibri-qbench.elf
ifneq ($(filter qbench-m,$(MAKECMDGOALS)),)
$(QBENCH_M_DIR)/board.mk: boards/$(BOARD).toml tools/colibri_tools/board/boards.py
	@mkdir -p $(dir $@)
	@$(PY) -m colibri_tools.board.board_cli make $(BOARD) -o $@
-include $(QBENCH_M_DIR)/board.mk
endif
$(QBENCH_M_DIR)/memory.ld: boards/$(BOARD).toml tools/colibri_tools/board/boards.py
	@mkdir -p $(dir $@)
	@$(PY) -m colibri_tools.board.board_cli ld $(BOARD) -o $@
$(QBENCH_M_DIR)/colibri-qbench.elf: bench/colibri_qbench_m.c $(QBENCH_M_START)/start.c \
        $(QBENCH_M_START)/link.ld $(QBENCH_M_DIR)/memory.ld $(CORE_SRC) $(call kernel_src,$(BOARD_KERNELS)) \
        $(CORE_HDR)
	$(BOARD_CC) $(BOARD_CFLAGS) -std=c11 -Wall -Wextra -Werror $(FP_STRICT) -O2 $(CORE_INC) \
	    '-DCOLIBRI_BENCH_TABLES=$(call kernel_tables,$(BOARD_KERNELS))' --specs=rdimon.specs \
	    -L$(QBENCH_M_DIR) -T $(QBENCH_M_START)/link.ld $(filter %.c,$^) -o $@

# ---- sanitizers ------------------------------------------------------------
ASAN_CFLAGS := $(WARN) $(FP_STRICT) -O1 -g -fno-omit-frame-pointer \
               -fsanitize=address,undefined -fno-sanitize-recover=all $(CORE_INC)
asan: $(BUILD)/asan/colibri-run $(BUILD)/asan/libcolibri.a
# The x86 SIMD tables at -Og: the same sanitizers, but -O1's inlining of their
# unrolled instances took 30-60 s a file to compile under UBSan (-Og: 2-4 s).
$(patsubst %.c,$(BUILD)/asan/%.o,$(wildcard sdk/src/kernels/x86/*.c)): ASAN_CFLAGS += -Og

$(BUILD)/asan/%.o: %.c $(CORE_HDR) $(wildcard ports/linux/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(ASAN_CFLAGS) -Iports/linux -c $< -o $@

$(BUILD)/asan/libcolibri.a: $(call core_objs,asan)
	rm -f $@ && $(AR) rcs $@ $^

$(BUILD)/asan/colibri-run: $(patsubst %.c,$(BUILD)/asan/%.o,$(RUN_SRC) $(LINUX_SRC)) $(BUILD)/asan/libcolibri.a
	$(CC) -pthread -fsanitize=address,undefined -o $@ $^

# ---- test programs (sanitized) --------------------------------------------
TEST_CFLAGS := -std=c11 -Wall -Wextra -Werror $(FP_STRICT) -O1 -g -fsanitize=address,undefined \
               -fno-sanitize-recover=all $(CORE_INC)
test-bins: $(BUILD)/asan/test_units $(BUILD)/asan/image_probe $(BUILD)/asan/test_kernels \
           $(BUILD)/asan/test_port_seam $(BUILD)/asan/layout_dump $(BUILD)/asan/sizes_dump \
           $(BUILD)/asan/crypto_probe $(BUILD)/asan/test_slots $(BUILD)/asan/expert_port \
           $(BUILD)/asan/expert_cache

$(BUILD)/asan/test_units: tests/sdk/test_units.c $(BUILD)/asan/libcolibri.a
	$(CC) $(TEST_CFLAGS) $^ -o $@

# Every compiled kernel table against the contract (docs/kernels.md).
$(BUILD)/asan/test_kernels: tests/sdk/test_kernels.c tests/sdk/kernels_here_linux.c \
        $(BUILD)/asan/ports/linux/colibri_linux_kernels.o \
        $(BUILD)/asan/libcolibri.a tests/sdk/test_kernels_qk.h
	$(CC) $(TEST_CFLAGS) -Iports/linux '-DCOLIBRI_TEST_KERNEL_TABLES=$(KERNEL_TABLES)' \
	    $(filter-out %.h,$^) -lm -o $@

# The same contract test for the AArch64 tables (NEON), static, run under
# qemu-aarch64 (tests/sdk/test_core.py).
$(BUILD)/aarch64-test/test_kernels: tests/sdk/test_kernels.c tests/sdk/kernels_here_linux.c \
        ports/linux/colibri_linux_kernels.c tests/sdk/test_kernels_qk.h \
        $(CORE_SRC) $(call kernel_src,$(AARCH64_KERNELS)) $(CORE_HDR)
	@mkdir -p $(dir $@)
	$(AARCH64_CC) -std=c11 -Wall -Wextra -Werror $(FP_STRICT) -O2 -static $(CORE_INC) -Iports/linux \
	    '-DCOLIBRI_TEST_KERNEL_TABLES=$(call kernel_tables,$(AARCH64_KERNELS))' \
	    '-DCOLIBRI_LINUX_KERNEL_TABLES=$(call kernel_tables,$(AARCH64_KERNELS))' \
	    $(filter %.c,$^) -lm -o $@

# The port's expert slots against the in-place run (tests/golden/test_expert_port.py).
$(BUILD)/asan/expert_port: tests/sdk/expert_port.c $(patsubst %.c,$(BUILD)/asan/%.o,$(LINUX_SRC)) \
        $(BUILD)/asan/libcolibri.a
	$(CC) $(TEST_CFLAGS) -Iports/linux $^ -pthread -o $@

# The core's expert cache against the image in memory (tests/golden/test_expert_cache_core.py).
$(BUILD)/asan/expert_cache: tests/sdk/expert_cache.c $(BUILD)/asan/libcolibri.a
	$(CC) $(TEST_CFLAGS) $^ -o $@

$(BUILD)/asan/sizes_dump: tests/sdk/sizes_dump.c $(BUILD)/asan/libcolibri.a
	$(CC) $(TEST_CFLAGS) $^ -o $@

$(BUILD)/asan/layout_dump: tests/sdk/layout_dump.c $(BUILD)/asan/libcolibri.a
	$(CC) $(TEST_CFLAGS) $^ -o $@

$(BUILD)/asan/test_port_seam: tests/sdk/test_port_seam.c $(BUILD)/asan/libcolibri.a
	$(CC) $(TEST_CFLAGS) $^ -o $@

$(BUILD)/asan/image_probe: tests/sdk/image_probe.c $(BUILD)/asan/libcolibri.a
	$(CC) $(TEST_CFLAGS) $^ -o $@

$(BUILD)/asan/crypto_probe: tests/sdk/crypto_probe.c $(BUILD)/asan/libcolibri.a
	$(CC) $(TEST_CFLAGS) $^ -o $@

$(BUILD)/asan/test_slots: tests/sdk/test_slots.c $(BUILD)/asan/libcolibri.a
	$(CC) $(TEST_CFLAGS) $^ -o $@

# The whole power-cut sweep (docs/ota.md): optimised, not sanitized.
$(BUILD)/host/test_slots: tests/sdk/test_slots.c $(BUILD)/host/libcolibri.a
	$(CC) $(WARN) $(FP_STRICT) -O2 $(CORE_INC) $^ -o $@

# The core's math against the host libm: optimised, not sanitized (it sweeps
# 44 million inputs; the sanitized core is covered by test_units).
$(BUILD)/host/test_math: tests/sdk/test_math.c sdk/src/colibri_math.c sdk/src/colibri_math.h
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(FP_STRICT) -O2 $(CORE_INC) tests/sdk/test_math.c sdk/src/colibri_math.c -lm -o $@

# libFuzzer targets (need clang): the loader, and the over-the-air parsers
# (signature block, slot store). The core's objects are compiled once with the
# fuzzer's coverage instrumentation and shared by every fuzz target (with
# ports/serial/serial.mk's fuzz_serial_runner too).
FUZZ_CC ?= clang
FUZZ_CFLAGS := -std=c11 -g -O1 $(FP_STRICT) -fno-sanitize-recover=all $(CORE_INC)
# Only the reference table: no fuzz target chooses another (the SIMD tables
# under the fuzzer's sanitizers took a minute of CI to compile for nothing;
# they meet their contract under ASan and UBSan in test_kernels).
FUZZ_SDK_OBJ := $(patsubst %.c,$(BUILD)/fuzz/%.o,$(call kernel_src,reference) $(CORE_SRC))
fuzz: $(BUILD)/fuzz/fuzz_image $(BUILD)/fuzz/fuzz_ota

$(BUILD)/fuzz/%.o: %.c $(CORE_HDR)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link,address,undefined -c $< -o $@

$(BUILD)/fuzz/fuzz_image $(BUILD)/fuzz/fuzz_ota: $(BUILD)/fuzz/%: tests/fuzz/%.c $(FUZZ_SDK_OBJ)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer,address,undefined $^ -o $@

# ---- cross builds of the core (objects only: proves it compiles clean) -----
AARCH64_CC  ?= aarch64-linux-gnu-gcc
ARMNONE_CC  ?= arm-none-eabi-gcc
CM7_FLAGS   := -mcpu=cortex-m7 -mthumb -mfpu=fpv5-d16 -mfloat-abi=hard
cross: $(call core_objs,aarch64,$(AARCH64_KERNELS)) $(call core_objs,cortex-m7,reference)

$(BUILD)/aarch64/%.o: %.c
	@mkdir -p $(dir $@)
	$(AARCH64_CC) $(WARN) $(FP_STRICT) -O2 $(CORE_INC) -c $< -o $@

$(BUILD)/cortex-m7/%.o: %.c
	@mkdir -p $(dir $@)
	$(ARMNONE_CC) $(CM7_FLAGS) $(WARN) $(FP_STRICT) -O2 -ffunction-sections -fdata-sections $(CORE_INC) -c $< -o $@

# Freestanding: no hosted libc headers beyond the freestanding set.
freestanding: $(call core_objs,freestanding,reference)

$(BUILD)/freestanding/%.o: %.c
	@mkdir -p $(dir $@)
	$(ARMNONE_CC) $(CM7_FLAGS) $(WARN) $(FP_STRICT) -O2 -ffreestanding -DCOLIBRI_FREESTANDING=1 $(CORE_INC) -c $< -o $@

# Code size of the core per target: text/data/bss summed over the objects.
size: host cross
	@echo "target      text    data     bss"
	@size -t $(call core_objs,host) | tail -1 | awk '{printf "x86-64   %7s %7s %7s\n", $$1, $$2, $$3}'
	@aarch64-linux-gnu-size -t $(call core_objs,aarch64,$(AARCH64_KERNELS)) | tail -1 | awk '{printf "aarch64  %7s %7s %7s\n", $$1, $$2, $$3}'
	@arm-none-eabi-size -t $(call core_objs,cortex-m7,reference) | tail -1 | awk '{printf "cortex-m7%7s %7s %7s\n", $$1, $$2, $$3}'

include ports/linux/install.mk
include ports/baremetal/firmware.mk
include ports/serial/serial.mk
-include ports/linux/cross.mk

clean:
	rm -rf $(BUILD)
