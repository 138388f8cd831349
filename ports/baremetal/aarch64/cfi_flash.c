/*
 * cfi_flash.c - the board's A/B weight slots (board file [slots],
 * docs/ota.md) in a CFI NOR flash with the Intel/Sharp command set, two
 * 16-bit chips side by side on a 32-bit bus: QEMU virt's flash1
 * (pflash_cfi01, 256 KiB blocks). Each command goes to both chips at once
 * (0x00XX00XX); the status register is polled until both are ready and its
 * error bits are checked. Programming is one 32-bit word at a time and only
 * clears bits (new = old & data), as NOR does; the flash returns to
 * read-array mode after every operation, so the weights read in place
 * between steps. The MMU maps the slots Normal non-cacheable, read-write.
 */
#include <string.h>

#include "board.h"
#include "board_config.h"
#include "sysreg.h"

#define CMD(c) ((uint32_t)(c)*0x00010001u)
#define CMD_READ_ARRAY CMD(0xFF)
#define CMD_CLEAR_STATUS CMD(0x50)
#define CMD_BLOCK_ERASE CMD(0x20)
#define CMD_ERASE_CONFIRM CMD(0xD0)
#define CMD_WORD_PROGRAM CMD(0x40)
#define STATUS_READY CMD(0x80)
#define STATUS_ERRORS CMD(0x3A) /* erase, program, VPP, block locked */
#define POLL_LIMIT 100000000u

static volatile uint32_t *word_at(uint64_t address)
{
    return (volatile uint32_t *)(uintptr_t)address;
}

static void command(uint64_t address, uint32_t value)
{
    *word_at(address) = value;
    aarch64_dsb_sy();
}

/* Wait for both chips to be ready; 0, or -1 on a timeout or an error bit. */
static int wait_ready(uint64_t address)
{
    uint32_t status = 0;
    for (uint32_t i = 0; i < POLL_LIMIT; i++) {
        status = *word_at(address);
        if ((status & STATUS_READY) == STATUS_READY) {
            break;
        }
    }
    return (status & STATUS_READY) == STATUS_READY && (status & STATUS_ERRORS) == 0 ? 0 : -1;
}

/* Clear the status and go back to read-array mode (the weights read in place). */
static int read_array(uint64_t address, int result)
{
    command(address, CMD_CLEAR_STATUS);
    command(address, CMD_READ_ARRAY);
    return result;
}

static colibri_status flash_erase(void *ctx, uint64_t offset, uint64_t size)
{
    (void)ctx;
    const uint64_t sector = COLIBRI_BOARD_SLOTS_SECTOR;
    if (offset % sector != 0 || size % sector != 0 || offset > COLIBRI_BOARD_SLOTS_SIZE ||
        size > COLIBRI_BOARD_SLOTS_SIZE - offset) {
        return COLIBRI_E_FLASH;
    }
    for (uint64_t at = offset; at < offset + size; at += sector) {
        uint64_t address = COLIBRI_BOARD_SLOTS_BASE + at;
        command(address, CMD_BLOCK_ERASE);
        command(address, CMD_ERASE_CONFIRM);
        if (read_array(address, wait_ready(address)) != 0) {
            return COLIBRI_E_FLASH;
        }
    }
    return COLIBRI_OK;
}

#define WINDOW_WORDS 1024u /* words programmed per visit to command mode */

/* Program the words [first, first + n) with value[i] & what they hold now
 * (NOR only clears bits): read them while in read-array mode, then program
 * them all in one stay in command mode. */
static int program_words(uint64_t first, uint32_t *value, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        value[i] &= *word_at(first + 4u * i);
    }
    int result = 0;
    for (uint32_t i = 0; i < n && result == 0; i++) {
        command(first + 4u * i, CMD_WORD_PROGRAM);
        command(first + 4u * i, value[i]);
        result = wait_ready(first + 4u * i);
    }
    return read_array(first, result);
}

static colibri_status flash_program(void *ctx, uint64_t offset, const void *data, size_t size)
{
    (void)ctx;
    uint32_t window[WINDOW_WORDS];
    const uint8_t *src = (const uint8_t *)data;
    if (offset > COLIBRI_BOARD_SLOTS_SIZE || size > COLIBRI_BOARD_SLOTS_SIZE - offset) {
        return COLIBRI_E_FLASH;
    }
    uint64_t at = COLIBRI_BOARD_SLOTS_BASE + offset;
    uint64_t end = at + size;
    while (at < end) {
        uint64_t first = at & ~3ull;
        uint64_t last = (end + 3u) & ~3ull;
        uint32_t n =
            last - first > 4u * WINDOW_WORDS ? WINDOW_WORDS : (uint32_t)(last - first) / 4u;
        uint64_t stop = first + 4u * n < end ? first + 4u * n : end;
        memset(window, 0xFF, sizeof window);
        memcpy((uint8_t *)window + (at - first), src, (size_t)(stop - at));
        if (program_words(first, window, n) != 0) {
            return COLIBRI_E_FLASH;
        }
        src += stop - at;
        at = stop;
    }
    return COLIBRI_OK;
}

const colibri_slots *board_slots(const uint8_t *trusted_key)
{
    static colibri_slots slots;
    if (!COLIBRI_BOARD_HAS_SLOTS) {
        return NULL;
    }
    slots.base = (const uint8_t *)(uintptr_t)COLIBRI_BOARD_SLOTS_BASE;
    slots.sector_size = (uint32_t)COLIBRI_BOARD_SLOTS_SECTOR;
    slots.record[0] = COLIBRI_BOARD_SLOT_RECORD0 - COLIBRI_BOARD_SLOTS_BASE;
    slots.record[1] = COLIBRI_BOARD_SLOT_RECORD1 - COLIBRI_BOARD_SLOTS_BASE;
    slots.slot[0] = COLIBRI_BOARD_SLOT_A - COLIBRI_BOARD_SLOTS_BASE;
    slots.slot[1] = COLIBRI_BOARD_SLOT_B - COLIBRI_BOARD_SLOTS_BASE;
    slots.slot_size = COLIBRI_BOARD_SLOT_SIZE;
    slots.erase = flash_erase;
    slots.program = flash_program;
    slots.trusted_key = trusted_key;
    return &slots;
}
