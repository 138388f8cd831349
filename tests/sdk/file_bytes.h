/*
 * file_bytes.h - a whole file in memory, for the test programs: its bytes in
 * a buffer aligned to `align` (a power of two; the size rounded up to it, the
 * padding zero), or NULL; *size gets the file's size. free() releases it.
 */
#ifndef COLIBRI_TEST_FILE_BYTES_H
#define COLIBRI_TEST_FILE_BYTES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline unsigned char *file_bytes(const char *path, size_t *size, size_t align)
{
    FILE *f = fopen(path, "rb");
    unsigned char *data = NULL;
    long n = -1;
    if (f != NULL && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 &&
        fseek(f, 0, SEEK_SET) == 0) {
        size_t rounded = ((size_t)n + align - 1u) / align * align;
        data = aligned_alloc(align, rounded);
        if (data != NULL) {
            memset(data + n, 0, rounded - (size_t)n);
        }
        if (data != NULL && fread(data, 1, (size_t)n, f) != (size_t)n) {
            free(data);
            data = NULL;
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    *size = (size_t)n;
    return data;
}

#endif
