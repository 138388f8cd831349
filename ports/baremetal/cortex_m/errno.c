/*
 * errno.c - where newlib's libm writes errno.
 *
 * expf/powf/sqrtf report range and domain errors through *__errno(). The
 * libc's own __errno returns a field of the reentrancy structure, which
 * links in newlib's 1 KiB _impure_data (with stdio pointers) for a value
 * nobody reads: the core reports errors by status, never by errno. This
 * definition takes its place. Thread and interrupt code share it; since it
 * is never read, that is harmless.
 */
int *__errno(void);

static int errno_value;

int *__errno(void)
{
    return &errno_value;
}
