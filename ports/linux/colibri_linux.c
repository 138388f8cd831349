/*
 * colibri_linux.c - map a Colibri model image file (colibri_linux_map: the
 * steps of colibri_linux.h, locking in colibri_linux_lock.c and the access
 * advice in colibri_linux_advice.c) and unmap it. docs/linux.md is the
 * user's view.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "colibri_linux_internal.h"

static const uint8_t k_magic[8] = {0x43, 0x4F, 0x4C, 0x49, 0x42, 0x52, 0x49, 0x1A};

static void mapping_reset(colibri_linux_mapping *m)
{
    m->data = NULL;
    m->size = 0;
    m->image_size = 0;
    m->page_size = 0;
    m->fd = -1;
    m->locked = 0;
    m->populated = 0;
    m->flocked = 0;
    m->mtime_ns = 0;
}

/* Read exactly n bytes at offset 0; 0 on success, else errno (or EIO for a
 * file that became shorter). */
static int read_header(int fd, uint8_t *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, buf + got, n - got, (off_t)got);
        if (r < 0) {
            if (errno == EINTR) {
                continue;
            }
            return errno;
        }
        if (r == 0) {
            return EIO;
        }
        got += (size_t)r;
    }
    return 0;
}

static const char *file_kind(mode_t mode)
{
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISSOCK(mode))
        return "a socket";
    return "not a regular file";
}

/* Step 3: the header, read with pread: its magic and its image size. */
static colibri_linux_status check_header(colibri_linux_mapping *m, const char *path,
                                         uint8_t *header, char *err, size_t err_size)
{
    int e = read_header(m->fd, header, COLIBRI_LINUX_HEADER_SIZE);
    if (e != 0) {
        colibri_linux_set_err(err, err_size, "%s: cannot read the model image header: %s", path,
                              e == EIO ? "the file became shorter while it was opened"
                                       : strerror(e));
        return COLIBRI_LINUX_E_READ;
    }
    if (memcmp(header, k_magic, sizeof k_magic) != 0) {
        colibri_linux_set_err(err, err_size,
                              "%s: not a Colibri model image (the first 8 bytes are not "
                              "\"COLIBRI\\x1a\"; convert a checkpoint with colibri-convert)",
                              path);
        return COLIBRI_LINUX_E_BAD_MAGIC;
    }
    m->image_size = colibri_linux_load_u64le(header + COLIBRI_LINUX_HEADER_IMAGE_SIZE);
    if (m->image_size > (uint64_t)m->size) {
        colibri_linux_set_err(err, err_size,
                              "%s: the file is truncated: its header says the image is %llu bytes "
                              "but the file has only %llu",
                              path, (unsigned long long)m->image_size, (unsigned long long)m->size);
        return COLIBRI_LINUX_E_TRUNCATED;
    }
    return COLIBRI_LINUX_OK;
}

/* open + fstat + size checks + flock + header read. On success *fd is open. */
static colibri_linux_status open_checked(colibri_linux_mapping *m, const char *path, unsigned flags,
                                         uint8_t *header, char *err, size_t err_size)
{
    struct stat st;
    int e;
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; it changes
     * nothing for a regular file. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        e = errno;
        colibri_linux_set_err(err, err_size, "%s: cannot open the model file: %s", path,
                              strerror(e));
        return COLIBRI_LINUX_E_OPEN;
    }
    m->fd = fd;
    if (fstat(fd, &st) != 0) {
        e = errno;
        colibri_linux_set_err(err, err_size, "%s: cannot stat the model file: %s", path,
                              strerror(e));
        return COLIBRI_LINUX_E_OPEN;
    }
    if (!S_ISREG(st.st_mode)) {
        colibri_linux_set_err(err, err_size, "%s: is %s, not a model image file", path,
                              file_kind(st.st_mode));
        return COLIBRI_LINUX_E_NOT_REGULAR;
    }
    if (st.st_size == 0) {
        colibri_linux_set_err(err, err_size, "%s: the file is empty (0 bytes), not a model image",
                              path);
        return COLIBRI_LINUX_E_EMPTY;
    }
    if (st.st_size < (off_t)COLIBRI_LINUX_HEADER_SIZE) {
        colibri_linux_set_err(
            err, err_size,
            "%s: the file is %lld bytes, smaller than the %u-byte model image header", path,
            (long long)st.st_size, COLIBRI_LINUX_HEADER_SIZE);
        return COLIBRI_LINUX_E_TOO_SMALL;
    }
    if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX || (uint64_t)st.st_size > (uint64_t)PTRDIFF_MAX) {
        colibri_linux_set_err(
            err, err_size,
            "%s: the file is %lld bytes, too large to map in this process's address space", path,
            (long long)st.st_size);
        return COLIBRI_LINUX_E_TOO_LARGE;
    }
    m->size = (size_t)st.st_size;
    m->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;

    if ((flags & COLIBRI_LINUX_MAP_NO_FLOCK) == 0) {
        if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
            m->flocked = 1;
        } else if (errno == EWOULDBLOCK) {
            colibri_linux_set_err(err, err_size,
                                  "%s: another process holds an exclusive lock on the file "
                                  "(it is being written); try again when it is done",
                                  path);
            return COLIBRI_LINUX_E_LOCKED;
        }
        /* Other failures (ENOLCK, a file system without flock): go on unlocked. */
    }

    return check_header(m, path, header, err, err_size);
}

colibri_linux_status colibri_linux_map(colibri_linux_mapping *m, const char *path, unsigned flags,
                                       char *err, size_t err_size)
{
    uint8_t header[COLIBRI_LINUX_HEADER_SIZE];
    colibri_linux_status st;
    long page;
    void *p;

    colibri_linux_set_err(err, err_size, "%s", "");
    if (m == NULL) {
        colibri_linux_set_err(err, err_size, "colibri_linux_map: no mapping struct given");
        return COLIBRI_LINUX_E_BAD_ARGUMENT;
    }
    mapping_reset(m);
    if (path == NULL || path[0] == '\0') {
        colibri_linux_set_err(err, err_size, "colibri_linux_map: no model file name given");
        return COLIBRI_LINUX_E_BAD_ARGUMENT;
    }
    if ((flags & ~COLIBRI_LINUX_MAP_FLAGS) != 0) {
        colibri_linux_set_err(err, err_size, "colibri_linux_map: unknown flags 0x%x",
                              flags & ~COLIBRI_LINUX_MAP_FLAGS);
        return COLIBRI_LINUX_E_BAD_ARGUMENT;
    }
    page = sysconf(_SC_PAGESIZE);
    m->page_size = page > 0 ? (size_t)page : 4096u;

    st = open_checked(m, path, flags, header, err, err_size);
    if (st != COLIBRI_LINUX_OK) {
        colibri_linux_unmap(m);
        return st;
    }
    p = mmap(NULL, m->size, PROT_READ,
             MAP_PRIVATE | ((flags & COLIBRI_LINUX_MAP_POPULATE) != 0 ? MAP_POPULATE : 0), m->fd,
             0);
    if (p == MAP_FAILED) {
        int e = errno;
        colibri_linux_set_err(err, err_size, "%s: cannot map the model file (%llu bytes): %s", path,
                              (unsigned long long)m->size, strerror(e));
        colibri_linux_unmap(m);
        return COLIBRI_LINUX_E_MMAP;
    }
    m->data = (const uint8_t *)p;
    m->populated = (flags & COLIBRI_LINUX_MAP_POPULATE) != 0;
    colibri_linux_advise_initial(m, header);

    if ((flags & COLIBRI_LINUX_MAP_MLOCK) != 0) {
        st = colibri_linux_lock_image(m, path, err, err_size);
        if (st != COLIBRI_LINUX_OK) {
            colibri_linux_unmap(m);
            return st;
        }
    }
    return COLIBRI_LINUX_OK;
}

int colibri_linux_changed(const colibri_linux_mapping *m)
{
    struct stat st;
    if (m == NULL || m->fd < 0 || fstat(m->fd, &st) != 0) {
        return -1;
    }
    int64_t mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    return mtime_ns != m->mtime_ns || (uint64_t)st.st_size != (uint64_t)m->size;
}

void colibri_linux_unmap(colibri_linux_mapping *m)
{
    if (m == NULL) {
        return;
    }
    if (m->data != NULL) {
        if (m->locked) {
            (void)munlock(m->data, (size_t)m->image_size);
        }
        (void)munmap((void *)m->data, m->size);
    }
    if (m->fd >= 0) {
        if (m->flocked) {
            (void)flock(m->fd, LOCK_UN);
        }
        (void)close(m->fd);
    }
    mapping_reset(m);
}
