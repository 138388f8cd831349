/*
 * colibri_linux_text.c - the Linux port's message helpers: an error text
 * into the caller's buffer, a byte count for humans.
 */
#include <stdarg.h>
#include <stdio.h>

#include "colibri_linux_internal.h"

void colibri_linux_set_err(char *err, size_t err_size, const char *fmt, ...)
{
    va_list ap;
    if (err == NULL || err_size == 0) {
        return;
    }
    va_start(ap, fmt);
    (void)vsnprintf(err, err_size, fmt, ap);
    va_end(ap);
}

void colibri_linux_format_bytes(char *buf, size_t n, uint64_t bytes)
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
    case COLIBRI_LINUX_E_THREAD: return "cannot start a thread";
    case COLIBRI_LINUX_E_NO_EXPERTS: return "the model has no routed experts to read from storage";
    case COLIBRI_LINUX_E_BUDGET: return "fewer expert cache slots than the model needs";
    }
    return "unknown port status";
}
