/*
 * colibri_linux_lock.c - colibri_linux_map's step 6 (colibri_linux.h):
 * mlock the image, after checking what this process and this machine allow,
 * and a message naming the cure when they do not.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(SYS_capget)
#include <linux/capability.h>
#endif

#include "colibri_linux_internal.h"

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
    colibri_linux_format_bytes(need_text, sizeof need_text, (uint64_t)need);
    colibri_linux_format_bytes(ram_text, sizeof ram_text, ram);
    colibri_linux_format_bytes(room_text, sizeof room_text, room);
    colibri_linux_set_err(
        err, err_size,
        "%s: cannot lock the model in memory: the image is %s, more than the %s that "
        "may be locked on this machine (%s of RAM less a margin of an eighth, at least "
        "256 MiB); run without --mlock",
        path, need_text, room_text, ram_text);
    return COLIBRI_LINUX_E_MLOCK_LIMIT;
}

colibri_linux_status colibri_linux_lock_image(colibri_linux_mapping *m, const char *path, char *err,
                                              size_t err_size)
{
    struct rlimit rl;
    char image_text[64], soft_text[64], hard_text[64];
    /* The image the header states, not the whole file: bytes past it are
     * never read. mlock counts whole pages. */
    size_t lock_size = (size_t)m->image_size;
    size_t need = colibri_linux_round_up(lock_size, m->page_size);
    colibri_linux_status fits = check_lock_fits_ram(m, need, path, err, err_size);
    if (fits != COLIBRI_LINUX_OK) {
        return fits;
    }

    colibri_linux_format_bytes(image_text, sizeof image_text, (uint64_t)lock_size);
    if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (uint64_t)need > (uint64_t)rl.rlim_cur && !has_cap_ipc_lock()) {
        unsigned long long need_kib = ((unsigned long long)need + 1023u) / 1024u;
        colibri_linux_format_bytes(soft_text, sizeof soft_text, (uint64_t)rl.rlim_cur);
        if (rl.rlim_max == RLIM_INFINITY) {
            (void)snprintf(hard_text, sizeof hard_text, "unlimited");
        } else {
            colibri_linux_format_bytes(hard_text, sizeof hard_text, (uint64_t)rl.rlim_max);
        }
        colibri_linux_set_err(
            err, err_size,
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
        colibri_linux_set_err(err, err_size,
                              "%s: cannot lock the model in memory (%s): mlock failed: %s%s", path,
                              image_text, strerror(e), why);
        return COLIBRI_LINUX_E_MLOCK;
    }
    m->locked = 1;
    return COLIBRI_LINUX_OK;
}
