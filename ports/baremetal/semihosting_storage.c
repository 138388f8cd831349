/*
 * semihosting_storage.c - the model image read from a host file through Arm
 * semihosting (board.h, "Storage"): what a board without the image in its
 * address map reads the routed experts from under QEMU, in place of the
 * QSPI indirect read or SD block read of a real board.
 *
 * The emulator's command line (SYS_GET_CMDLINE) names the file: QEMU
 * -semihosting-config enable=on,target=native,arg=PROGRAM,arg=PATH[,arg=...]
 * gives "PROGRAM PATH ...". The file is opened read-only in binary mode
 * (SYS_OPEN), each read seeks (SYS_SEEK) and reads (SYS_READ) in pieces of
 * at most READ_PIECE bytes, so that the host is never asked for more than a
 * 32-bit word holds.
 */
#include <stddef.h>
#include <stdint.h>

#include "board.h"
#include "semihosting_call.h"

#define SYS_OPEN 0x01u
#define SYS_READ 0x06u
#define SYS_SEEK 0x0Au
#define SYS_FLEN 0x0Cu
#define SYS_GET_CMDLINE 0x15u
#define OPEN_READ_BINARY 1u /* fopen mode "rb" */
#define READ_PIECE (1u << 20)
#define CMDLINE_BYTES 256u

static char cmdline[CMDLINE_BYTES];
static intptr_t handle = -1;
static uint64_t file_size;

/* The command line's words after the first two (PROGRAM PATH), or "". */
const char *board_args(void)
{
    const char *p = cmdline;
    for (int word = 0; word < 2 && *p != '\0'; word++) {
        while (*p != '\0' && *p != ' ') {
            p++;
        }
        while (*p == ' ') {
            p++;
        }
    }
    return p;
}

/* The command line's second word (the file's path) into path: 0, or -1. */
static int file_path(char *path, size_t room)
{
    uintptr_t block[2] = {(uintptr_t)cmdline, CMDLINE_BYTES - 1u};
    const char *p = cmdline;
    size_t n = 0;
    if (semihosting_call(SYS_GET_CMDLINE, block) != 0) {
        cmdline[0] = '\0';
        return -1;
    }
    cmdline[block[1] < CMDLINE_BYTES ? block[1] : CMDLINE_BYTES - 1u] = '\0';
    while (*p != '\0' && *p != ' ') {
        p++;
    }
    while (*p == ' ') {
        p++;
    }
    while (p[n] != '\0' && p[n] != ' ' && n + 1u < room) {
        path[n] = p[n];
        n++;
    }
    path[n] = '\0';
    return n > 0 ? 0 : -1;
}

int64_t board_storage_open(void)
{
    static char path[CMDLINE_BYTES];
    uintptr_t open_block[3] = {(uintptr_t)path, OPEN_READ_BINARY, 0};
    uintptr_t flen_block[1];
    intptr_t length;
    if (handle >= 0) {
        return (int64_t)file_size;
    }
    if (file_path(path, sizeof path) != 0) {
        return -1;
    }
    while (path[open_block[2]] != '\0') {
        open_block[2]++;
    }
    handle = semihosting_call(SYS_OPEN, open_block);
    if (handle < 0) {
        return -1;
    }
    flen_block[0] = (uintptr_t)handle;
    length = semihosting_call(SYS_FLEN, flen_block);
    if (length < 0) {
        handle = -1;
        return -1;
    }
    file_size = (uint64_t)length;
    return (int64_t)file_size;
}

int board_storage_read(void *ctx, uint64_t offset, void *dst, size_t size)
{
    uint8_t *to = (uint8_t *)dst;
    (void)ctx;
    if (handle < 0) {
        return BOARD_STORAGE_CLOSED;
    }
    if (offset > file_size || size > file_size - offset || offset > UINTPTR_MAX - size) {
        return BOARD_STORAGE_PAST_END;
    }
    while (size > 0) {
        size_t piece = size < READ_PIECE ? size : READ_PIECE;
        uintptr_t seek_block[2] = {(uintptr_t)handle, (uintptr_t)offset};
        uintptr_t read_block[3] = {(uintptr_t)handle, (uintptr_t)to, piece};
        if (semihosting_call(SYS_SEEK, seek_block) != 0) {
            return BOARD_STORAGE_IO;
        }
        if (semihosting_call(SYS_READ, read_block) != 0) { /* the bytes not read */
            return BOARD_STORAGE_IO;
        }
        to += piece;
        offset += piece;
        size -= piece;
    }
    return 0;
}
