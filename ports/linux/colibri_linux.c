/*
 * colibri_linux.c - map a Colibri model image file; ticks and prefetch for
 * the core's port struct. See colibri_linux.h for the contract and
 * docs/linux.md for the user's view.
 */
#define _GNU_SOURCE

#include "colibri_linux.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(SYS_capget)
#include <linux/capability.h>
#endif

#define HEADER_SIZE 256u
#define TABLE_ENTRY_SIZE 64u
static const uint8_t k_magic[8] = {0x43, 0x4F, 0x4C, 0x49, 0x42, 0x52, 0x49, 0x1A};

/* ---- small helpers ------------------------------------------------------ */

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

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void
set_err(char *err, size_t err_size, const char *fmt, ...)
{
    va_list ap;
    if (err == NULL || err_size == 0) {
        return;
    }
    va_start(ap, fmt);
    (void)vsnprintf(err, err_size, fmt, ap);
    va_end(ap);
}

static uint64_t load_u64le(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    return v;
}

static uint32_t load_u32le(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* Human-readable size: "8192 bytes (8.0 KiB)". */
static void format_bytes(char *buf, size_t n, uint64_t bytes)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)bytes;
    int u = -1;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (u < 0) {
        (void)snprintf(buf, n, "%llu bytes", (unsigned long long)bytes);
    } else {
        (void)snprintf(buf, n, "%llu bytes (%.1f %s)", (unsigned long long)bytes, v, units[u]);
    }
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

/* Does the process have CAP_IPC_LOCK in its effective set (which lets it
 * lock memory beyond RLIMIT_MEMLOCK)? 0 when unknown. */
static int has_cap_ipc_lock(void)
{
#if defined(SYS_capget) && defined(_LINUX_CAPABILITY_VERSION_3) && defined(CAP_IPC_LOCK)
    struct __user_cap_header_struct hdr;
    struct __user_cap_data_struct data[2];
    memset(&hdr, 0, sizeof hdr);
    memset(data, 0, sizeof data);
    hdr.version = _LINUX_CAPABILITY_VERSION_3;
    hdr.pid = 0;
    if (syscall(SYS_capget, &hdr, data) != 0) {
        return 0;
    }
    return (data[CAP_IPC_LOCK / 32].effective >> (CAP_IPC_LOCK % 32)) & 1u;
#else
    return 0;
#endif
}

static size_t round_up(size_t v, size_t align)
{
    size_t r = v % align;
    return r == 0 ? v : v + (align - r);
}

/* ---- mlock ---------------------------------------------------------------- */

/* RAM that locking must leave free: an eighth of it, at least 256 MiB. */
#define LOCK_MARGIN_MIN ((uint64_t)256u << 20)

static uint64_t physical_memory(const colibri_linux_mapping *m)
{
    long pages = sysconf(_SC_PHYS_PAGES);
    return pages > 0 ? (uint64_t)pages * m->page_size : 0u;
}

/* Even with CAP_IPC_LOCK (no RLIMIT_MEMLOCK applies), never lock more than
 * the machine's RAM less a margin: the rest of the system must keep running. */
static colibri_linux_status check_lock_fits_ram(const colibri_linux_mapping *m, size_t need,
                                                const char *path, char *err, size_t err_size)
{
    uint64_t ram = physical_memory(m), margin = ram / 8u, room;
    char need_text[64], ram_text[64], room_text[64];
    margin = margin > LOCK_MARGIN_MIN ? margin : LOCK_MARGIN_MIN;
    room = ram > margin ? ram - margin : 0u;
    if (ram == 0 || (uint64_t)need <= room) {
        return COLIBRI_LINUX_OK;
    }
    format_bytes(need_text, sizeof need_text, (uint64_t)need);
    format_bytes(ram_text, sizeof ram_text, ram);
    format_bytes(room_text, sizeof room_text, room);
    set_err(err, err_size,
            "%s: cannot lock the model in memory: the image is %s, more than the %s that "
            "may be locked on this machine (%s of RAM less a margin of an eighth, at least "
            "256 MiB); run without --mlock",
            path, need_text, room_text, ram_text);
    return COLIBRI_LINUX_E_MLOCK_LIMIT;
}

static colibri_linux_status lock_image(colibri_linux_mapping *m, const char *path, char *err,
                                       size_t err_size)
{
    struct rlimit rl;
    char image_text[64], soft_text[64], hard_text[64];
    /* The image the header states, not the whole file: bytes past it are
     * never read. mlock counts whole pages. */
    size_t lock_size = (size_t)m->image_size;
    size_t need = round_up(lock_size, m->page_size);
    colibri_linux_status fits = check_lock_fits_ram(m, need, path, err, err_size);
    if (fits != COLIBRI_LINUX_OK) {
        return fits;
    }

    format_bytes(image_text, sizeof image_text, (uint64_t)lock_size);
    if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (uint64_t)need > (uint64_t)rl.rlim_cur && !has_cap_ipc_lock()) {
        unsigned long long need_kib = ((unsigned long long)need + 1023u) / 1024u;
        format_bytes(soft_text, sizeof soft_text, (uint64_t)rl.rlim_cur);
        if (rl.rlim_max == RLIM_INFINITY) {
            (void)snprintf(hard_text, sizeof hard_text, "unlimited");
        } else {
            format_bytes(hard_text, sizeof hard_text, (uint64_t)rl.rlim_max);
        }
        set_err(err, err_size,
                "%s: cannot lock the model in memory: the image is %s, more than the "
                "%s this process may lock (RLIMIT_MEMLOCK soft limit; hard limit %s). "
                "To raise it to at least %llu KiB: run `ulimit -l %llu` (or "
                "`ulimit -l unlimited`) in the shell that starts the program (only "
                "root can go above the hard limit), or add a `memlock` line to "
                "/etc/security/limits.conf, or set LimitMEMLOCK= in its systemd unit; "
                "or give the program CAP_IPC_LOCK (setcap cap_ipc_lock+ep PROGRAM); "
                "or run without locking",
                path, image_text, soft_text, hard_text, need_kib, need_kib);
        return COLIBRI_LINUX_E_MLOCK_LIMIT;
    }
    if (mlock(m->data, lock_size) != 0) {
        int e = errno;
        const char *why = "";
        if (e == ENOMEM) {
            why = " (the RLIMIT_MEMLOCK limit, counting memory this process "
                  "has already locked, or the free RAM is too small for it)";
        } else if (e == EPERM) {
            why = " (the process has no CAP_IPC_LOCK and its RLIMIT_MEMLOCK is 0)";
        } else if (e == EAGAIN) {
            why = " (some pages could not be locked; the system is short of "
                  "lockable memory)";
        }
        set_err(err, err_size, "%s: cannot lock the model in memory (%s): mlock failed: %s%s", path,
                image_text, strerror(e), why);
        return COLIBRI_LINUX_E_MLOCK;
    }
    m->locked = 1;
    return COLIBRI_LINUX_OK;
}

/* ---- madvise --------------------------------------------------------------- */

/* MADV_RANDOM over everything, MADV_WILLNEED over the header and tables. */
static void advise_initial(const colibri_linux_mapping *m, const uint8_t *header)
{
    uint64_t table_off = load_u64le(header + 48);
    uint64_t n_tensors = load_u32le(header + 56);
    uint64_t tables_end = (uint64_t)m->size;
    size_t head;

    (void)madvise((void *)m->data, m->size, MADV_RANDOM);
    /* Garbage in an unvalidated header only shortens or lengthens a hint. */
    if (table_off <= (uint64_t)m->size) {
        uint64_t end = table_off + n_tensors * TABLE_ENTRY_SIZE; /* < 2^64: no wrap */
        if (end < tables_end) {
            tables_end = end;
        }
    }
    if (tables_end < HEADER_SIZE) {
        tables_end = HEADER_SIZE;
    }
    head = round_up((size_t)tables_end, m->page_size);
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
    default: return EINVAL;
    }
    if (madvise((void *)m->data, m->size, advice) != 0) {
        return errno;
    }
    return 0;
}

/* ---- map / unmap ------------------------------------------------------------ */

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
        set_err(err, err_size, "%s: cannot open the model file: %s", path, strerror(e));
        return COLIBRI_LINUX_E_OPEN;
    }
    m->fd = fd;
    if (fstat(fd, &st) != 0) {
        e = errno;
        set_err(err, err_size, "%s: cannot stat the model file: %s", path, strerror(e));
        return COLIBRI_LINUX_E_OPEN;
    }
    if (!S_ISREG(st.st_mode)) {
        set_err(err, err_size, "%s: is %s, not a model image file", path, file_kind(st.st_mode));
        return COLIBRI_LINUX_E_NOT_REGULAR;
    }
    if (st.st_size == 0) {
        set_err(err, err_size, "%s: the file is empty (0 bytes), not a model image", path);
        return COLIBRI_LINUX_E_EMPTY;
    }
    if (st.st_size < (off_t)HEADER_SIZE) {
        set_err(err, err_size,
                "%s: the file is %lld bytes, smaller than the %u-byte model image header", path,
                (long long)st.st_size, HEADER_SIZE);
        return COLIBRI_LINUX_E_TOO_SMALL;
    }
    if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX || (uint64_t)st.st_size > (uint64_t)PTRDIFF_MAX) {
        set_err(err, err_size,
                "%s: the file is %lld bytes, too large to map in this process's address space",
                path, (long long)st.st_size);
        return COLIBRI_LINUX_E_TOO_LARGE;
    }
    m->size = (size_t)st.st_size;
    m->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;

    if ((flags & COLIBRI_LINUX_MAP_NO_FLOCK) == 0) {
        if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
            m->flocked = 1;
        } else if (errno == EWOULDBLOCK) {
            set_err(err, err_size,
                    "%s: another process holds an exclusive lock on the file "
                    "(it is being written); try again when it is done",
                    path);
            return COLIBRI_LINUX_E_LOCKED;
        }
        /* Other failures (ENOLCK, a file system without flock): go on unlocked. */
    }

    e = read_header(fd, header, HEADER_SIZE);
    if (e != 0) {
        set_err(err, err_size, "%s: cannot read the model image header: %s", path,
                e == EIO ? "the file became shorter while it was opened" : strerror(e));
        return COLIBRI_LINUX_E_READ;
    }
    if (memcmp(header, k_magic, sizeof k_magic) != 0) {
        set_err(err, err_size,
                "%s: not a Colibri model image (the first 8 bytes are not "
                "\"COLIBRI\\x1a\"; convert a checkpoint with colibri-convert)",
                path);
        return COLIBRI_LINUX_E_BAD_MAGIC;
    }
    m->image_size = load_u64le(header + 16);
    if (m->image_size > (uint64_t)m->size) {
        set_err(err, err_size,
                "%s: the file is truncated: its header says the image is %llu bytes "
                "but the file has only %llu",
                path, (unsigned long long)m->image_size, (unsigned long long)m->size);
        return COLIBRI_LINUX_E_TRUNCATED;
    }
    return COLIBRI_LINUX_OK;
}

colibri_linux_status colibri_linux_map(colibri_linux_mapping *m, const char *path, unsigned flags,
                                       char *err, size_t err_size)
{
    uint8_t header[HEADER_SIZE];
    colibri_linux_status st;
    long page;
    void *p;

    set_err(err, err_size, "%s", "");
    if (m == NULL) {
        set_err(err, err_size, "colibri_linux_map: no mapping struct given");
        return COLIBRI_LINUX_E_BAD_ARGUMENT;
    }
    mapping_reset(m);
    if (path == NULL || path[0] == '\0') {
        set_err(err, err_size, "colibri_linux_map: no model file name given");
        return COLIBRI_LINUX_E_BAD_ARGUMENT;
    }
    if ((flags & ~COLIBRI_LINUX_MAP_FLAGS) != 0) {
        set_err(err, err_size, "colibri_linux_map: unknown flags 0x%x",
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
        set_err(err, err_size, "%s: cannot map the model file (%llu bytes): %s", path,
                (unsigned long long)m->size, strerror(e));
        colibri_linux_unmap(m);
        return COLIBRI_LINUX_E_MMAP;
    }
    m->data = (const uint8_t *)p;
    m->populated = (flags & COLIBRI_LINUX_MAP_POPULATE) != 0;
    advise_initial(m, header);

    if ((flags & COLIBRI_LINUX_MAP_MLOCK) != 0) {
        st = lock_image(m, path, err, err_size);
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

/* ---- port hooks ----------------------------------------------------------- */

uint64_t colibri_linux_ticks_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) {
        return 0;
    }
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t port_ticks(void *ctx)
{
    (void)ctx;
    return colibri_linux_ticks_ns();
}

/* madvise(MADV_WILLNEED) over the pages of [addr, addr + size) that lie in
 * the mapping. Never fails (errors are dropped), never blocks on I/O: the
 * kernel starts the reads and returns. */
static void port_prefetch(void *ctx, const void *addr, size_t size)
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

/* parallel_for with the port's context: the pool in it. */
static void port_parallel_for(void *ctx, uint32_t n_tasks, colibri_task_fn fn, void *arg)
{
    colibri_linux_parallel_for(((colibri_linux_port_ctx *)ctx)->pool, n_tasks, fn, arg);
}

void colibri_linux_port_init(colibri_port *port, colibri_linux_port_ctx *ctx)
{
    if (port == NULL) {
        return;
    }
    memset(port, 0, sizeof *port);
    port->version = COLIBRI_PORT_VERSION;
    port->kernels = colibri_linux_kernels(NULL);
    port->ticks = port_ticks;
    port->prefetch = ctx != NULL && ctx->map != NULL && !ctx->map->locked && !ctx->map->populated
                         ? port_prefetch
                         : NULL;
    port->parallel_for =
        ctx != NULL && colibri_linux_pool_threads(ctx->pool) > 1u ? port_parallel_for : NULL;
    port->ctx = ctx;
}

void *colibri_linux_alloc_aligned(size_t bytes, size_t align)
{
    size_t rounded;
    if (align == 0 || bytes > SIZE_MAX - align) {
        return NULL;
    }
    rounded = (bytes + align - 1) / align * align;
    return aligned_alloc(align, rounded == 0 ? align : rounded);
}

/* ---- status text ---------------------------------------------------------- */

const char *colibri_linux_strerror(colibri_linux_status status)
{
    switch (status) {
    case COLIBRI_LINUX_OK: return "success";
    case COLIBRI_LINUX_E_BAD_ARGUMENT: return "bad argument";
    case COLIBRI_LINUX_E_OPEN: return "cannot open the file";
    case COLIBRI_LINUX_E_NOT_REGULAR: return "not a regular file";
    case COLIBRI_LINUX_E_EMPTY: return "empty file";
    case COLIBRI_LINUX_E_TOO_SMALL: return "file smaller than the image header";
    case COLIBRI_LINUX_E_TOO_LARGE: return "file too large to map";
    case COLIBRI_LINUX_E_BAD_MAGIC: return "not a Colibri model image";
    case COLIBRI_LINUX_E_TRUNCATED: return "file shorter than its header's image size";
    case COLIBRI_LINUX_E_LOCKED: return "file locked by a writer";
    case COLIBRI_LINUX_E_READ: return "cannot read the image header";
    case COLIBRI_LINUX_E_MMAP: return "cannot map the file";
    case COLIBRI_LINUX_E_MLOCK_LIMIT: return "image larger than the memory-lock limit";
    case COLIBRI_LINUX_E_MLOCK: return "cannot lock the image in memory";
    }
    return "unknown port status";
}
