/* colibri_text.c - see colibri_text.h. */
#include "colibri_text.h"

void colibri_text_init(colibri_text *t, char *buf, size_t cap, const colibri_serial_io *io)
{
    t->buf = buf;
    t->cap = cap;
    t->len = 0;
    t->io = io;
    buf[0] = '\0';
}

void colibri_text_flush(colibri_text *t)
{
    if (t->io != NULL && t->len > 0) {
        t->io->write(t->io->ctx, (const uint8_t *)t->buf, t->len);
        t->len = 0;
        t->buf[0] = '\0';
    }
}

void colibri_text_char(colibri_text *t, char c)
{
    if (t->len + 1 >= t->cap) {
        if (t->io == NULL) {
            return;
        }
        colibri_text_flush(t);
    }
    t->buf[t->len++] = c;
    t->buf[t->len] = '\0';
}

void colibri_text_str(colibri_text *t, const char *s)
{
    while (s != NULL && *s != '\0') {
        colibri_text_char(t, *s++);
    }
}

void colibri_text_u64(colibri_text *t, uint64_t v)
{
    char digits[20];
    int n = 0;
    do {
        digits[n++] = (char)('0' + (int)(v % 10u));
        v /= 10u;
    } while (v != 0);
    while (n > 0) {
        colibri_text_char(t, digits[--n]);
    }
}

void colibri_text_hex32(colibri_text *t, uint32_t v)
{
    static const char hex[] = "0123456789ABCDEF";
    colibri_text_str(t, "0x");
    for (int shift = 28; shift >= 0; shift -= 4) {
        colibri_text_char(t, hex[(v >> shift) & 0xFu]);
    }
}

void colibri_text_newline(colibri_text *t)
{
    colibri_text_str(t, "\r\n");
}

size_t colibri_text_length(const char *s, size_t max)
{
    size_t n = 0;
    while (s != NULL && n < max && s[n] != '\0') {
        n++;
    }
    return n;
}

char colibri_text_skip_spaces(const char **p)
{
    while (**p == ' ' || **p == '\t') {
        (*p)++;
    }
    return **p;
}

int colibri_text_parse_u32(const char **p, uint32_t max, uint32_t *out)
{
    const char *s = *p;
    uint64_t v = 0;
    colibri_text_skip_spaces(&s);
    if (*s < '0' || *s > '9') {
        return -1;
    }
    while (*s >= '0' && *s <= '9') {
        v = v * 10u + (uint64_t)(*s - '0');
        if (v > max) {
            return -1;
        }
        s++;
    }
    *out = (uint32_t)v;
    *p = s;
    return 0;
}
