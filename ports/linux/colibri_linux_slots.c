/*
 * colibri_linux_slots.c - A/B weight slots in one file (or block device) on
 * Linux (docs/ota.md, "Linux"): the store is mapped shared and read in
 * place; erase and program are pwrite + fdatasync, so each step is on the
 * medium before the next one starts (the order the power-cut proof needs).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "colibri_linux.h"

static void store_err(char *err, size_t size, const char *fmt, ...)
{
    va_list ap;
    if (err == NULL || size == 0) {
        return;
    }
    va_start(ap, fmt);
    (void)vsnprintf(err, size, fmt, ap);
    va_end(ap);
}

static colibri_status write_all(int fd, const uint8_t *data, size_t size, uint64_t offset)
{
    while (size > 0) {
        ssize_t n = pwrite(fd, data, size, (off_t)offset);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return COLIBRI_E_FLASH;
        }
        data += n;
        size -= (size_t)n;
        offset += (uint64_t)n;
    }
    return COLIBRI_OK;
}

static colibri_status store_program(void *ctx, uint64_t offset, const void *data, size_t size)
{
    colibri_linux_store *s = (colibri_linux_store *)ctx;
    if (offset > s->size || size > s->size - offset ||
        write_all(s->fd, (const uint8_t *)data, size, offset) != COLIBRI_OK) {
        return COLIBRI_E_FLASH;
    }
    return fdatasync(s->fd) == 0 ? COLIBRI_OK : COLIBRI_E_FLASH;
}

/* Erase = write 0xFF, one sector per write, each synced. */
static colibri_status store_erase(void *ctx, uint64_t offset, uint64_t size)
{
    colibri_linux_store *s = (colibri_linux_store *)ctx;
    uint8_t ones[4096];
    memset(ones, 0xFF, sizeof ones);
    uint32_t sector = s->slots.sector_size;
    if (offset % sector != 0 || size % sector != 0 || offset > s->size || size > s->size - offset) {
        return COLIBRI_E_FLASH;
    }
    for (uint64_t at = offset; at < offset + size; at += sector) {
        for (uint32_t done = 0; done < sector; done += sizeof ones) {
            uint32_t n = sector - done < sizeof ones ? sector - done : (uint32_t)sizeof ones;
            if (write_all(s->fd, ones, n, at + done) != COLIBRI_OK) {
                return COLIBRI_E_FLASH;
            }
        }
        if (fdatasync(s->fd) != 0) {
            return COLIBRI_E_FLASH;
        }
    }
    return COLIBRI_OK;
}

int colibri_linux_parse_key(const char *text, uint8_t key[32])
{
    static const char digits[] = "0123456789abcdef";
    if (text == NULL || strlen(text) != 64) {
        return -1;
    }
    for (int i = 0; i < 64; i++) {
        const char *at = strchr(digits, text[i] | 0x20);
        if (at == NULL) {
            return -1;
        }
        key[i / 2] = (uint8_t)(key[i / 2] << 4 | (unsigned)(at - digits));
    }
    return 0;
}

colibri_linux_status colibri_linux_store_open(colibri_linux_store *s, const char *path,
                                              uint32_t sector, const uint8_t *trusted_key,
                                              char *err, size_t err_size)
{
    struct stat st;
    memset(s, 0, sizeof *s);
    s->fd = open(path, O_RDWR | O_CLOEXEC);
    if (s->fd < 0 || fstat(s->fd, &st) != 0) {
        store_err(err, err_size, "%s: cannot open the slot store: %s", path, strerror(errno));
        colibri_linux_store_close(s);
        return COLIBRI_LINUX_E_OPEN;
    }
    if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
        store_err(err, err_size, "%s: not a file or block device", path);
        colibri_linux_store_close(s);
        return COLIBRI_LINUX_E_NOT_REGULAR;
    }
    off_t end = lseek(s->fd, 0, SEEK_END);
    s->size = end > 0 ? (size_t)end : 0;
    colibri_slots_layout(&s->slots, s->size, sector);
    if (sector < 4096 || (sector & (sector - 1)) || s->slots.slot_size == 0) {
        store_err(err, err_size,
                  "%s: %zu bytes cannot hold two records of a %u-byte sector and two slots "
                  "(make one with colibri-slot init)",
                  path, s->size, sector);
        colibri_linux_store_close(s);
        return COLIBRI_LINUX_E_TOO_SMALL;
    }
    if (flock(s->fd, LOCK_EX | LOCK_NB) != 0) {
        store_err(err, err_size, "%s: another colibri-slot or colibri-run is changing the store",
                  path);
        colibri_linux_store_close(s);
        return COLIBRI_LINUX_E_LOCKED;
    }
    void *map = mmap(NULL, s->size, PROT_READ, MAP_SHARED, s->fd, 0);
    if (map == MAP_FAILED) {
        store_err(err, err_size, "%s: cannot map the slot store: %s", path, strerror(errno));
        colibri_linux_store_close(s);
        return COLIBRI_LINUX_E_MMAP;
    }
    s->map = (const uint8_t *)map;
    s->slots.base = s->map;
    s->slots.erase = store_erase;
    s->slots.program = store_program;
    s->slots.ctx = s;
    if (trusted_key != NULL) {
        memcpy(s->key, trusted_key, sizeof s->key);
        s->slots.trusted_key = s->key;
    }
    return COLIBRI_LINUX_OK;
}

void colibri_linux_store_unlock(colibri_linux_store *s)
{
    if (s->fd >= 0) {
        (void)flock(s->fd, LOCK_UN);
    }
}

void colibri_linux_store_close(colibri_linux_store *s)
{
    if (s->map != NULL) {
        (void)munmap((void *)s->map, s->size);
    }
    if (s->fd >= 0) {
        (void)close(s->fd);
    }
    memset(s, 0, sizeof *s);
    s->fd = -1;
}
