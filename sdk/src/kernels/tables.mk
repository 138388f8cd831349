# The kernel tables and their sources, below sdk/src/kernels: one line a
# table, the file that defines colibri_kernels_<table> first, then the files
# of the tables it borrows slots from (borrowed.h says which slots). Read by
# the Makefile (include), the Zephyr module's CMake, the Python tools (the
# names a board's `kernels` may use) and the tests: the one list.
KERNEL_SOURCES_reference  := reference.c
KERNEL_SOURCES_avx2       := x86/avx2.c x86/avx2_quant.c x86/avx2_r16.c x86/avx2_qk.c x86/avx2_qkr16.c
KERNEL_SOURCES_avx512     := x86/avx512.c x86/avx2.c x86/avx2_quant.c x86/avx2_r16.c x86/avx2_qk.c x86/avx2_qkr16.c
KERNEL_SOURCES_avx512vnni := x86/avx512vnni.c x86/avx512vnni_decode.c x86/avx512vnni_strip.c x86/avx512vnni_r16.c x86/avx512vnni_qkr16.c x86/avx512.c x86/avx2.c x86/avx2_quant.c x86/avx2_r16.c x86/avx2_qk.c x86/avx2_qkr16.c
KERNEL_SOURCES_neon       := arm/neon.c arm/neon_r16.c arm/neon_qk.c arm/neon_qkr16.c
KERNEL_SOURCES_neondot    := arm/neondot.c arm/neon.c arm/neon_r16.c arm/neon_qk.c arm/neon_qkr16.c
KERNEL_SOURCES_helium     := armv8m/helium.c armv8m/helium_qk.c
KERNEL_SOURCES_dsp        := armv8m/dsp.c armv8m/dsp_qk.c
