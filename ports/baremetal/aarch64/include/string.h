/*
 * string.h - the string functions AArch64 firmware has: those of libc_min.c.
 *
 * The AArch64 port is built with -nostdinc against the compiler's own
 * freestanding headers and this folder, so no Linux C library header
 * (Debian's aarch64-linux-gnu-gcc would otherwise find glibc's) can reach
 * firmware code. Anything else from <string.h> is not available here.
 */
#ifndef COLIBRI_AARCH64_STRING_H
#define COLIBRI_AARCH64_STRING_H

#include <stddef.h>

void *memcpy(void *restrict dst, const void *restrict src, size_t n);
void *memmove(void *dst, const void *src, size_t n);
void *memset(void *dst, int value, size_t n);
int memcmp(const void *a, const void *b, size_t n);
size_t strlen(const char *s);

#endif /* COLIBRI_AARCH64_STRING_H */
