/*
 * static_buffers.c - the firmware way on Linux: every buffer is static and
 * sized at compile time from the model_config.h that colibri-convert wrote,
 * and colibri_init refuses any image but the one the header describes.
 *
 *   cc -std=c11 -Isdk/include -Iports/linux -I<dir of model_config.h> \
 *      samples/linux/static_buffers.c ports/linux/colibri_linux*.c \
 *      build/host/libcolibri.a -o static_buffers
 *   ./static_buffers model.bin 1 2 3
 *
 * Prints the greedy next 8 token ids, one line.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>

#include "colibri.h"
#include "colibri_linux.h"
#include "model_config.h"

#define GENERATE 8

_Static_assert(COLIBRI_MODEL_CONTEXT > GENERATE, "context too small for this sample");

static colibri_model model;
static colibri_state state;
static _Alignas(16) uint8_t kv_memory[COLIBRI_MODEL_STATE_BYTES];
static _Alignas(16) uint8_t scratch[COLIBRI_MODEL_SCRATCH_BYTES];
static float logits[COLIBRI_MODEL_VOCAB_SIZE];

static int fail(const char *what, colibri_status status)
{
    fprintf(stderr, "static_buffers: %s: %s (status %d)\n", what, colibri_strerror(status),
            (int)status);
    return 1;
}

static int run(int32_t *ids, uint32_t n)
{
    colibri_status s =
        colibri_state_init(&state, &model, kv_memory, sizeof kv_memory, COLIBRI_MODEL_CONTEXT);
    if (s != COLIBRI_OK) {
        return fail("state", s);
    }
    for (int i = 0; i < GENERATE; i++) {
        s = colibri_forward(&model, &state, ids, n, logits, COLIBRI_LOGITS_LAST, scratch,
                            sizeof scratch, NULL);
        if (s != COLIBRI_OK) {
            return fail("forward", s);
        }
        ids[0] = (int32_t)colibri_argmax(logits, COLIBRI_MODEL_VOCAB_SIZE);
        n = 1;
        printf("%s%d", i ? " " : "", (int)ids[0]);
    }
    printf("\n");
    return 0;
}

int main(int argc, char **argv)
{
    colibri_linux_mapping map;
    colibri_options options = {COLIBRI_MODEL_FINGERPRINT, NULL};
    int32_t ids[COLIBRI_MODEL_CONTEXT - GENERATE];
    uint32_t n = 0;
    char err[1024];
    if (argc < 3 || (uint32_t)(argc - 2) > sizeof ids / sizeof ids[0]) {
        fprintf(stderr, "usage: static_buffers MODEL.bin ID [ID ...]\n");
        return 2;
    }
    for (int i = 2; i < argc; i++) {
        ids[n++] = (int32_t)strtol(argv[i], NULL, 10);
    }
    if (colibri_linux_map(&map, argv[1], 0, err, sizeof err) != COLIBRI_LINUX_OK) {
        fprintf(stderr, "static_buffers: %s\n", err);
        return 1;
    }
    colibri_status s = colibri_init(&model, map.data, map.size, &options);
    int rc = s == COLIBRI_OK ? run(ids, n) : fail(argv[1], s);
    colibri_linux_unmap(&map);
    return rc;
}
