/* console.c - text output for samples, on top of board_uart_write. */
#include "console.h"

#include "board.h"

void console_puts(const char *text)
{
    size_t n = 0;
    while (text[n] != '\0') {
        n++;
    }
    board_uart_write((const uint8_t *)text, n);
}

void console_put_u64(uint64_t value)
{
    char digits[21];
    size_t i = sizeof digits;
    digits[--i] = '\0';
    do {
        digits[--i] = (char)('0' + value % 10u);
        value /= 10u;
    } while (value != 0 && i > 0);
    console_puts(digits + i);
}

void console_put_hex32(uint32_t value)
{
    static const char hex[] = "0123456789abcdef";
    char text[11] = "0x";
    for (int i = 0; i < 8; i++) {
        text[2 + i] = hex[(value >> (28 - 4 * i)) & 0xFu];
    }
    text[10] = '\0';
    console_puts(text);
}

void console_put_text(const char *text, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t c = (uint8_t)text[i];
        uint8_t shown = (c < 0x20u && c != '\n') || c == 0x7Fu ? (uint8_t)'?' : c;
        board_uart_write(&shown, 1);
    }
}
