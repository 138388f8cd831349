/*
 * colibri_zephyr_errno.c - with CONFIG_COLIBRI_MATH_TOOLCHAIN_LIBM, newlib's
 * libm reports overflow and domain errors through newlib's __errno(). Under
 * Zephyr's minimal libc that is Zephyr's errno. (The core never reads
 * errno; the functions only set it on out-of-range inputs.)
 */
#include <errno.h>

int *__errno(void);

int *__errno(void)
{
    return &errno;
}
