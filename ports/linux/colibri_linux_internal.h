/*
 * colibri_linux_internal.h - what the Linux port's files share and its
 * users do not see: the image header's few fields the port reads before
 * the core validates anything, the error and size texts, and the steps of
 * colibri_linux_map that live in files of their own (locking, advice).
 */
#ifndef COLIBRI_LINUX_INTERNAL_H
#define COLIBRI_LINUX_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "colibri_linux.h"

/* The image header (docs/format.md section 2): its size, the magic, and the
 * fields read here: image_size (u64 at 16), the tensor table's offset (u64
 * at 48) and entry count (u32 at 56), entries of 64 bytes. */
#define COLIBRI_LINUX_HEADER_SIZE 256u
#define COLIBRI_LINUX_HEADER_IMAGE_SIZE 16u
#define COLIBRI_LINUX_HEADER_TABLE_OFFSET 48u
#define COLIBRI_LINUX_HEADER_TENSOR_COUNT 56u
#define COLIBRI_LINUX_TABLE_ENTRY_SIZE 64u

static inline uint64_t colibri_linux_load_u64le(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    return v;
}

static inline uint32_t colibri_linux_load_u32le(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline size_t colibri_linux_round_up(size_t v, size_t align)
{
    size_t r = v % align;
    return r == 0 ? v : v + (align - r);
}

/* snprintf into err (nothing when err is NULL or err_size 0). */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
void colibri_linux_set_err(char *err, size_t err_size, const char *fmt, ...);

/* Human-readable size: "8192 bytes (8.0 KiB)". */
void colibri_linux_format_bytes(char *buf, size_t n, uint64_t bytes);

/* mlock the image the header states (colibri_linux_lock.c), after checking
 * RLIMIT_MEMLOCK and the machine's RAM; a refusal names the cure. */
colibri_linux_status colibri_linux_lock_image(colibri_linux_mapping *m, const char *path, char *err,
                                              size_t err_size);

/* MADV_RANDOM over the mapping, MADV_WILLNEED over the header and tables
 * (colibri_linux_advice.c). */
void colibri_linux_advise_initial(const colibri_linux_mapping *m, const uint8_t *header);

/* The port's prefetch hook: MADV_WILLNEED over the pages of [addr, addr +
 * size) that lie in the mapping of ctx (a colibri_linux_port_ctx). */
void colibri_linux_prefetch(void *ctx, const void *addr, size_t size);

#endif
