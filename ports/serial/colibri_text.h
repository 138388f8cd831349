/*
 * colibri_text.h - freestanding text output and number parsing for the
 * serial runner's line mode and ERROR texts (no printf, no strtol).
 *
 * A colibri_text writes into buf; with io set it sends and empties buf when
 * full and on colibri_text_flush, otherwise it keeps the first cap - 1
 * characters and drops the rest. buf is always NUL-terminated.
 */
#ifndef COLIBRI_TEXT_H
#define COLIBRI_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "colibri_proto.h"

typedef struct colibri_text {
    char *buf;
    size_t cap;                  /* bytes at buf, >= 2 */
    size_t len;                  /* characters held */
    const colibri_serial_io *io; /* NULL: fixed buffer */
} colibri_text;

void colibri_text_init(colibri_text *t, char *buf, size_t cap, const colibri_serial_io *io);
void colibri_text_char(colibri_text *t, char c);
void colibri_text_str(colibri_text *t, const char *s);
void colibri_text_u64(colibri_text *t, uint64_t v);   /* decimal */
void colibri_text_hex32(colibri_text *t, uint32_t v); /* 0x%08X */
void colibri_text_newline(colibri_text *t);           /* "\r\n" */
void colibri_text_flush(colibri_text *t);             /* send what is held (io only) */

/* Length of s, at most max (a bounded strlen). */
size_t colibri_text_length(const char *s, size_t max);

/* Skip spaces at *p; parse a decimal number <= max into *out and advance *p.
 * Returns 0, or -1 (nothing changes) when there is no digit or it is > max. */
int colibri_text_parse_u32(const char **p, uint32_t max, uint32_t *out);

/* Skip spaces at *p and return the character there. */
char colibri_text_skip_spaces(const char **p);

#endif
