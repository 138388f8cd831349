/*
 * fuzz_serial_runner.c - libFuzzer target for the device side of the serial
 * protocol (ports/serial): the input is the byte stream a host would send.
 * When the first byte is odd, the CRC of every frame found in the input is
 * fixed first, so the fuzzer reaches the payload handlers too.
 *
 *   make -f Makefile -f ports/serial/serial.mk build/fuzz/fuzz_serial_runner
 *   COLIBRI_FUZZ_MODEL=model.bin build/fuzz/fuzz_serial_runner -max_total_time=60
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "colibri_runner.h"
#include "colibri.h"

#define CONTEXT 16u
#define MAX_INPUT 65536u

static colibri_runner runner;
static uint8_t *image;
static size_t image_size;
static _Alignas(64) uint8_t kv[1u << 20];
static _Alignas(64) uint8_t scratch[1u << 20];
static float logits[1u << 16];
static uint8_t input[MAX_INPUT];
static size_t input_len, input_pos;

static int read_byte(void *ctx, uint32_t timeout_ms)
{
    (void)ctx;
    (void)timeout_ms;
    return input_pos < input_len ? input[input_pos++] : -1;
}

static void write_bytes(void *ctx, const uint8_t *data, size_t n)
{
    volatile uint8_t sink = 0;
    (void)ctx;
    for (size_t i = 0; i < n; i++) {
        sink ^= data[i]; /* touch every byte: ASan checks the reply buffer */
    }
}

static int in_interrupt(void *ctx, void (*fn)(void *), void *arg, size_t *stack_used)
{
    (void)ctx;
    fn(arg);
    if (stack_used != NULL) {
        *stack_used = 0;
    }
    return 0;
}

static void fix_crcs(void)
{
    for (size_t i = 0; i + 10 <= input_len; i++) {
        size_t length = (size_t)input[i + 4] | ((size_t)input[i + 5] << 8);
        if (input[i] != 0xC0 || input[i + 1] != 0x1B || length > 4096 ||
            i + 10 + length > input_len) {
            continue;
        }
        uint32_t crc = colibri_crc32_update(0, input + i + 2, 4 + length);
        for (int b = 0; b < 4; b++) {
            input[i + 6 + length + (size_t)b] = (uint8_t)(crc >> (8 * b));
        }
        i += 9 + length;
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *path = getenv("COLIBRI_FUZZ_MODEL");
    FILE *f = path != NULL ? fopen(path, "rb") : NULL;
    (void)argc;
    (void)argv;
    if (f == NULL || fseek(f, 0, SEEK_END) != 0) {
        fprintf(stderr, "set COLIBRI_FUZZ_MODEL to a model image\n");
        exit(2);
    }
    image_size = (size_t)ftell(f);
    image = aligned_alloc(64, (image_size + 63) / 64 * 64);
    if (image == NULL || fseek(f, 0, SEEK_SET) != 0 ||
        fread(image, 1, image_size, f) != image_size) {
        exit(2);
    }
    fclose(f);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    colibri_serial_io io = {read_byte, write_bytes, in_interrupt, NULL};
    colibri_runner_config cfg = {
        .image = image,
        .image_size = image_size,
        .kv = kv,
        .kv_size = sizeof kv,
        .context = CONTEXT,
        .scratch = scratch,
        .scratch_size = sizeof scratch,
        .logits = logits,
        .logits_count = sizeof logits / sizeof logits[0],
        .board_name = "fuzz",
        .tick_unit = "none",
    };
    if (colibri_runner_init(&runner, &io, &cfg) != COLIBRI_OK) {
        abort(); /* the model must load: the fuzzer is after the protocol */
    }
    input_len = size < MAX_INPUT ? size : MAX_INPUT;
    memcpy(input, data, input_len);
    input_pos = 0;
    if (input_len > 0 && (input[0] & 1u) != 0) {
        fix_crcs();
    }
    while (colibri_runner_poll(&runner, 0)) {
    }
    return 0;
}
