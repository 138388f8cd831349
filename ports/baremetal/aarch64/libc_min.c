/*
 * libc_min.c - the few C library pieces AArch64 firmware links against.
 *
 * The firmware is linked with -nostdlib: glibc's libc.a (the only AArch64 C
 * library on the build machine) needs an OS and picks its string functions
 * with IFUNCs. What the core and the samples need is here: mem* and strlen,
 * which GCC may also call for struct copies and clearing loops. No math
 * library is linked: the core computes its own (sdk/src/colibri_math.c).
 * include/string.h declares these; nothing else of a C library exists here.
 *
 * port.mk builds this file with -fno-tree-loop-distribute-patterns so GCC
 * does not turn these loops back into calls to themselves.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

void *memcpy(void *restrict dst, const void *restrict src, size_t n)
{
    uint8_t *d = dst;
    const uint8_t *s = src;
    if ((((uintptr_t)d | (uintptr_t)s) & 7u) == 0) {
        for (; n >= 8; n -= 8, d += 8, s += 8) {
            *(uint64_t *)(void *)d = *(const uint64_t *)(const void *)s;
        }
    }
    while (n-- > 0) {
        *d++ = *s++;
    }
    return dst;
}

void *memmove(void *dst, const void *src, size_t n)
{
    uint8_t *d = dst;
    const uint8_t *s = src;
    if (d == s || n == 0) {
        return dst;
    }
    if ((uintptr_t)d - (uintptr_t)s >= n) { /* no harmful overlap: copy forward */
        return memcpy(dst, src, n);
    }
    while (n-- > 0) {
        d[n] = s[n];
    }
    return dst;
}

void *memset(void *dst, int value, size_t n)
{
    uint8_t *d = dst;
    uint64_t pattern = 0x0101010101010101ull * (uint8_t)value;
    while (n > 0 && ((uintptr_t)d & 7u) != 0) {
        *d++ = (uint8_t)value;
        n--;
    }
    for (; n >= 8; n -= 8, d += 8) {
        *(uint64_t *)(void *)d = pattern;
    }
    while (n-- > 0) {
        *d++ = (uint8_t)value;
    }
    return dst;
}

int memcmp(const void *a, const void *b, size_t n)
{
    const uint8_t *x = a, *y = b;
    for (size_t i = 0; i < n; i++) {
        if (x[i] != y[i]) {
            return x[i] < y[i] ? -1 : 1;
        }
    }
    return 0;
}

size_t strlen(const char *s)
{
    size_t n = 0;
    while (s[n] != '\0') {
        n++;
    }
    return n;
}
