/*
 * prompt.c - token ids from a comma-separated Kconfig string.
 */
#include "prompt.h"

static const char *skip_separators(const char *p)
{
    while (*p == ',' || *p == ' ') {
        p++;
    }
    return p;
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* One decimal id at *p; advances *p past it. -1 if there is no digit or the
 * id is not below vocab_size. */
static int64_t parse_id(const char **p, uint32_t vocab_size)
{
    const char *q = *p;
    int64_t value = 0;
    if (!is_digit(*q)) {
        return -1;
    }
    while (is_digit(*q)) {
        value = value * 10 + (*q - '0');
        if (value >= vocab_size) {
            return -1;
        }
        q++;
    }
    *p = q;
    return value;
}

int prompt_parse(const char *text, int32_t *ids, uint32_t max, uint32_t vocab_size)
{
    uint32_t n = 0;
    for (const char *p = skip_separators(text); *p != '\0'; p = skip_separators(p)) {
        int64_t id = parse_id(&p, vocab_size);
        if (id < 0 || n == max) {
            return -1;
        }
        ids[n++] = (int32_t)id;
    }
    return n == 0 ? -1 : (int)n;
}
