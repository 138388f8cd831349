/*
 * colibri_linux_advice.c - what the Linux port tells the kernel about its
 * reads of the mapping (madvise): the access pattern at map time and on
 * request, and the prefetch hook the core calls before an expert block.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>

#include "colibri_linux_internal.h"

/* MADV_RANDOM over everything, MADV_WILLNEED over the header and tables. */
void colibri_linux_advise_initial(const colibri_linux_mapping *m, const uint8_t *header)
{
    uint64_t table_off = colibri_linux_load_u64le(header + COLIBRI_LINUX_HEADER_TABLE_OFFSET);
    uint64_t n_tensors = colibri_linux_load_u32le(header + COLIBRI_LINUX_HEADER_TENSOR_COUNT);
    uint64_t tables_end = (uint64_t)m->size;
    size_t head;

    (void)madvise((void *)m->data, m->size, MADV_RANDOM);
    /* Garbage in an unvalidated header only shortens or lengthens a hint. */
    if (table_off <= (uint64_t)m->size) {
        uint64_t end = table_off + n_tensors * COLIBRI_LINUX_TABLE_ENTRY_SIZE; /* < 2^64: no wrap */
        if (end < tables_end) {
            tables_end = end;
        }
    }
    if (tables_end < COLIBRI_LINUX_HEADER_SIZE) {
        tables_end = COLIBRI_LINUX_HEADER_SIZE;
    }
    head = colibri_linux_round_up((size_t)tables_end, m->page_size);
    (void)madvise((void *)m->data, head < m->size ? head : m->size, MADV_WILLNEED);
}

int colibri_linux_advise(const colibri_linux_mapping *m, colibri_linux_access access)
{
    int advice;
    if (m == NULL || m->data == NULL) {
        return EINVAL;
    }
    switch (access) {
    case COLIBRI_LINUX_ACCESS_RANDOM: advice = MADV_RANDOM; break;
    case COLIBRI_LINUX_ACCESS_SEQUENTIAL: advice = MADV_SEQUENTIAL; break;
    case COLIBRI_LINUX_ACCESS_WILLNEED: advice = MADV_WILLNEED; break;
    case COLIBRI_LINUX_ACCESS_DONTNEED: advice = MADV_DONTNEED; break;
    default: return EINVAL;
    }
    if (madvise((void *)m->data, m->size, advice) != 0) {
        return errno;
    }
    if (access == COLIBRI_LINUX_ACCESS_DONTNEED && m->fd >= 0) {
        return posix_fadvise(m->fd, 0, 0, POSIX_FADV_DONTNEED);
    }
    return 0;
}

/* madvise(MADV_WILLNEED) over the pages of [addr, addr + size) that lie in
 * the mapping. Never fails (errors are dropped), never blocks on I/O: the
 * kernel starts the reads and returns. */
void colibri_linux_prefetch(void *ctx, const void *addr, size_t size)
{
    const colibri_linux_port_ctx *port_ctx = ctx;
    const colibri_linux_mapping *m = port_ctx != NULL ? port_ctx->map : NULL;
    uintptr_t base, end, lo, hi;
    if (m == NULL || m->data == NULL || addr == NULL || size == 0) {
        return;
    }
    base = (uintptr_t)m->data;
    end = base + m->size;
    lo = (uintptr_t)addr;
    if (lo < base || lo >= end) {
        return;
    }
    hi = (size > end - lo) ? end : lo + size;
    lo -= (lo - base) % m->page_size; /* the mapping starts on a page */
    (void)madvise((void *)lo, (size_t)(hi - lo), MADV_WILLNEED);
}
