/*
 * image_probe.c - test driver: load an image file into a heap buffer of
 * exactly its size (so AddressSanitizer sees any read past the end), then
 * colibri_init, colibri_verify and a short colibri_forward.
 *
 *   image_probe FILE [FINGERPRINT]
 *
 * Prints "init=N verify=N forward=N" (status numbers; -1 = not run) and
 * exits 0; exits 2 when the file cannot be read.
 */
#include <stdio.h>
#include <stdlib.h>

#include "colibri.h"

static unsigned char *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    unsigned char *data = NULL;
    long length;
    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (length = ftell(f)) < 0 ||
        fseek(f, 0, SEEK_SET) != 0) {
        if (f != NULL) {
            fclose(f);
        }
        return NULL;
    }
    data = malloc(length > 0 ? (size_t)length : 1u);
    if (data != NULL && fread(data, 1, (size_t)length, f) != (size_t)length) {
        free(data);
        data = NULL;
    }
    fclose(f);
    *size = (size_t)length;
    return data;
}

static int run_forward(const colibri_model *model)
{
    uint32_t ctx = model->hp.max_context < 8 ? model->hp.max_context : 8;
    size_t state_bytes = colibri_state_size(model, ctx);
    size_t scratch_bytes = colibri_scratch_size(model, ctx);
    void *kv = aligned_alloc(16, (state_bytes + 15) / 16 * 16);
    void *work = aligned_alloc(16, (scratch_bytes + 15) / 16 * 16);
    float *logits = malloc((size_t)model->hp.vocab_size * 2 * sizeof(float));
    int32_t ids[2] = {0, (int32_t)(model->hp.vocab_size - 1)};
    colibri_state state;
    int status = (int)colibri_state_init(&state, model, kv, state_bytes, ctx);
    if (status == COLIBRI_OK) {
        status = (int)colibri_forward(model, &state, ids, ctx >= 2 ? 2 : 1, logits,
                                      COLIBRI_LOGITS_ALL, work, scratch_bytes, NULL);
    }
    free(kv);
    free(work);
    free(logits);
    return status;
}

int main(int argc, char **argv)
{
    size_t size = 0;
    unsigned char *image;
    colibri_model model;
    colibri_options options = {0, NULL};
    int init, verify = -1, forward = -1;
    if (argc < 2) {
        fprintf(stderr, "usage: image_probe FILE [FINGERPRINT]\n");
        return 2;
    }
    image = read_file(argv[1], &size);
    if (image == NULL) {
        fprintf(stderr, "image_probe: cannot read %s\n", argv[1]);
        return 2;
    }
    if (argc > 2) {
        options.expected_fingerprint = (uint32_t)strtoul(argv[2], NULL, 0);
    }
    init = (int)colibri_init(&model, image, size, &options);
    if (init == COLIBRI_OK) {
        verify = (int)colibri_verify(&model, NULL);
        forward = run_forward(&model);
    }
    printf("init=%d verify=%d forward=%d\n", init, verify, forward);
    free(image);
    return 0;
}
