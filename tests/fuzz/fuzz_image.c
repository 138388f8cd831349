/*
 * fuzz_image.c - libFuzzer target for the image loader.
 *
 * Random bytes almost never carry a valid meta CRC, which would stop every
 * input at the checksum. So the harness first writes the right CRC into a
 * copy of the input when the header's table bounds fit (the loader still
 * checks them itself), then runs colibri_init, colibri_verify and, on
 * success, a two-token colibri_forward; then the same with a port whose
 * routed experts are always unavailable (expert_acquire returns NULL), under
 * which an experts-last image (format 1.9) may be given in part: the input
 * cut at a byte its own first bytes choose. Build: make fuzz.
 */
#include <stdlib.h>
#include <string.h>

#include "colibri.h"

static uint64_t rd_le(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    return v;
}

static void fix_meta_crc(uint8_t *img, size_t size)
{
    static const uint8_t zero[4] = {0, 0, 0, 0};
    uint64_t end;
    if (size < 256) {
        return;
    }
    end = rd_le(img + 48, 8) + rd_le(img + 56, 4) * 64u;
    if (end < 28 || end > size) {
        return;
    }
    uint32_t crc = colibri_crc32_update(0, img, 24);
    crc = colibri_crc32_update(crc, zero, 4);
    crc = colibri_crc32_update(crc, img + 28, (size_t)(end - 28));
    for (int i = 0; i < 4; i++) {
        img[24 + i] = (uint8_t)(crc >> (8 * i));
    }
}

static void try_forward(const colibri_model *model)
{
    uint32_t ctx = 2;
    size_t kv_bytes = colibri_state_size(model, ctx), work_bytes = colibri_scratch_size(model, ctx);
    if (kv_bytes == 0 || kv_bytes > (64u << 20) || work_bytes > (64u << 20) ||
        model->hp.vocab_size > (1u << 20)) {
        return;
    }
    void *kv = aligned_alloc(16, (kv_bytes + 15) / 16 * 16);
    void *work = aligned_alloc(16, (work_bytes + 15) / 16 * 16);
    float *logits = malloc((size_t)model->hp.vocab_size * sizeof(float));
    int32_t ids[2] = {0, (int32_t)(model->hp.vocab_size - 1)};
    colibri_state state;
    if (colibri_state_init(&state, model, kv, kv_bytes, ctx) == COLIBRI_OK) {
        (void)colibri_forward(model, &state, ids, 2, logits, COLIBRI_LOGITS_LAST, work, work_bytes,
                              NULL);
    }
    free(kv);
    free(work);
    free(logits);
}

static const void *no_expert(void *ctx, uint32_t layer, uint32_t expert, uint64_t offset,
                             size_t size)
{
    (void)ctx, (void)layer, (void)expert, (void)offset, (void)size;
    return NULL;
}

static void no_release(void *ctx, uint32_t layer, uint32_t expert)
{
    (void)ctx, (void)layer, (void)expert;
}

/* Init, verify and forward on the first size bytes of img (a copy of
 * exactly that many, so a read past them is the sanitizer's to see). */
static void try_image(const uint8_t *img, size_t size, const colibri_options *options)
{
    uint8_t *part = malloc(size > 0 ? size : 1);
    colibri_model model;
    memcpy(part, img, size);
    if (colibri_init(&model, part, size, options) == COLIBRI_OK) {
        (void)colibri_verify(&model, NULL);
        try_forward(&model);
    }
    free(part);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const colibri_port storage = {
        .version = 4, .expert_acquire = no_expert, .expert_release = no_release};
    const colibri_options with_storage = {0, &storage};
    uint8_t *img = malloc(size > 0 ? size : 1);
    memcpy(img, data, size);
    fix_meta_crc(img, size);
    try_image(img, size, NULL);
    try_image(img, size, &with_storage);
    if (size > 300u) { /* a cut the input chooses: past the header, before its end */
        size_t cut = 256u + (size_t)rd_le(img + size - 2u, 2) % (size - 256u);
        try_image(img, cut, &with_storage);
    }
    free(img);
    return 0;
}
