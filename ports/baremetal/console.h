/* console.h - tiny text output over board_uart_write for samples (no stdio). */
#ifndef COLIBRI_CONSOLE_H
#define COLIBRI_CONSOLE_H

#include <stddef.h>
#include <stdint.h>

void console_puts(const char *text);
void console_put_u64(uint64_t value);
void console_put_hex32(uint32_t value);
/* Write n bytes as they are, except control bytes other than \n, shown as '?'. */
void console_put_text(const char *text, size_t n);

#endif
