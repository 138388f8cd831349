/*
 * cut_writes.c - an LD_PRELOAD library that cuts the power of a Linux
 * program at its k-th pwrite (tests/ports/linux/test_linux_slots.py):
 *
 *   COLIBRI_CUT_AT=k     SIGKILL the process at its k-th pwrite (1-based),
 *   COLIBRI_CUT_TEAR=1   ... after writing the first half of it (torn),
 *   COLIBRI_CUT_COUNT=F  when the process exits normally, write its number
 *                        of pwrite calls to file F.
 *
 * A pwrite that completed is in the page cache, which survives the killed
 * process: what the next program sees is what a storage that keeps every
 * write before the cut, and none after, would hold. The slot store syncs
 * each step (fdatasync), so real storage keeps that order too.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);

static long calls;

static ssize_t cut_pwrite(const char *name, int fd, const void *buf, size_t n, off_t offset)
{
    pwrite_fn real = (pwrite_fn)dlsym(RTLD_NEXT, name);
    const char *at = getenv("COLIBRI_CUT_AT");
    calls++;
    if (at != NULL && calls == atol(at)) {
        const char *tear = getenv("COLIBRI_CUT_TEAR");
        if (tear != NULL && tear[0] == '1' && n > 1) {
            (void)real(fd, buf, n / 2, offset);
        }
        kill(getpid(), SIGKILL);
    }
    return real(fd, buf, n, offset);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t offset)
{
    return cut_pwrite("pwrite", fd, buf, n, offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t offset)
{
    return cut_pwrite("pwrite64", fd, buf, n, offset);
}

__attribute__((destructor)) static void report(void)
{
    const char *path = getenv("COLIBRI_CUT_COUNT");
    FILE *f = path != NULL ? fopen(path, "w") : NULL;
    if (f != NULL) {
        fprintf(f, "%ld\n", calls);
        fclose(f);
    }
}
