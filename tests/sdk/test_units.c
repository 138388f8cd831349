/*
 * test_units.c - unit tests of the core's pieces that need no model image:
 * CRC, status texts, top-k selection and its tie rule, expert ordering,
 * argmax, kernels, and colibri_init's argument checks.
 * Prints one line per failure and a closing "N passed, M failed" line.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "colibri.h"
#include "kernels.h"
#include "router.h"
#include "workspace.h"

#include "check.h"

static void test_crc32(void)
{
    const char *text = "123456789";
    CHECK(colibri_crc32_update(0, (const uint8_t *)text, 9) == 0xCBF43926u);
    uint32_t part = colibri_crc32_update(0, (const uint8_t *)text, 4);
    CHECK(colibri_crc32_update(part, (const uint8_t *)text + 4, 5) == 0xCBF43926u);
    CHECK(colibri_crc32_update(0, NULL, 0) == 0u);
}

/* The definition, bit by bit (reflected polynomial 0xEDB88320). */
static uint32_t crc32_bitwise(const uint8_t *data, size_t size)
{
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < size; i++) {
        crc ^= data[i];
        for (int bit = 0; bit < 8; bit++) {
            crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
        }
    }
    return ~crc;
}

/* Four bytes a step: every start offset and length around the word steps,
 * and a split anywhere, against the definition. */
static void test_crc32_every_alignment(void)
{
    static uint8_t data[80];
    uint32_t x = 12345u;
    for (size_t i = 0; i < sizeof data; i++) {
        x = x * 1103515245u + 12345u;
        data[i] = (uint8_t)(x >> 24);
    }
    for (size_t start = 0; start < 8; start++) {
        for (size_t n = 0; start + n <= sizeof data; n++) {
            uint32_t want = crc32_bitwise(data + start, n);
            CHECK(colibri_crc32_update(0, data + start, n) == want);
            uint32_t part = colibri_crc32_update(0, data + start, n / 3);
            CHECK(colibri_crc32_update(part, data + start + n / 3, n - n / 3) == want);
        }
    }
}

static void test_strerror(void)
{
    for (int s = 0; s <= COLIBRI_E_BAD_ROUTE; s++) {
        const char *text = colibri_strerror((colibri_status)s);
        CHECK(text != NULL && strcmp(text, "unknown status") != 0);
        for (int t = 0; t < s; t++) {
            CHECK(strcmp(text, colibri_strerror((colibri_status)t)) != 0);
        }
    }
    CHECK(strcmp(colibri_strerror((colibri_status)40), "unknown status") == 0);
    CHECK(strcmp(colibri_strerror((colibri_status)-1), "unknown status") == 0);
}

static void test_top_k_ties(void)
{
    const float scores[5] = {0.2f, 0.5f, 0.5f, 0.1f, 0.5f};
    uint32_t idx[5];
    float w[5];
    colibri_router_top_k(scores, 5, 3, idx, w);
    CHECK(idx[0] == 1 && idx[1] == 2 && idx[2] == 4);
    CHECK(w[0] == 0.5f && w[2] == 0.5f);
    colibri_router_top_k(scores, 5, 5, idx, w);
    CHECK(idx[3] == 0 && idx[4] == 3);
}

static void test_top_k_order_and_nan(void)
{
    const float scores[6] = {0.1f, NAN, 0.9f, -1.0f, 0.3f, NAN};
    uint32_t idx[6];
    float w[6];
    colibri_router_top_k(scores, 6, 6, idx, w);
    CHECK(idx[0] == 2 && idx[1] == 4 && idx[2] == 0 && idx[3] == 3);
    CHECK(idx[4] == 1 && idx[5] == 5);
    colibri_router_top_k(scores, 6, 1, idx, w);
    CHECK(idx[0] == 2 && w[0] == 0.9f);
}

static void test_sort_by_expert(void)
{
    uint32_t idx[4] = {7, 2, 9, 0};
    float w[4] = {0.7f, 0.2f, 0.9f, 0.05f};
    colibri_router_sort_by_expert(idx, w, 4);
    CHECK(idx[0] == 0 && idx[1] == 2 && idx[2] == 7 && idx[3] == 9);
    CHECK(w[0] == 0.05f && w[1] == 0.2f && w[2] == 0.7f && w[3] == 0.9f);
}

static void test_argmax(void)
{
    const float v[5] = {1.0f, 3.0f, -2.0f, 3.0f, 0.0f};
    const float with_nan[3] = {NAN, -5.0f, -6.0f};
    CHECK(colibri_argmax(v, 5) == 1);
    CHECK(colibri_argmax(v, 1) == 0);
    CHECK(colibri_argmax(with_nan, 3) == 1);
    /* NaN ranks below every number; all NaN gives 0 (was n - 1). */
    const float all_nan[4] = {NAN, NAN, NAN, NAN}, nan_between[4] = {-1.0f, NAN, 2.0f, NAN};
    CHECK(colibri_argmax(all_nan, 4) == 0);
    CHECK(colibri_argmax(nan_between, 4) == 2);
}

static void test_kernels(void)
{
    const float x[4] = {1.0f, -2.0f, 3.0f, 0.5f};
    const float w[4] = {1.0f, 0.5f, 2.0f, -1.0f};
    float out[4], sm[3] = {1.0f, 2.0f, 3.0f}, head[4] = {1.0f, 2.0f, 3.0f, 4.0f}, cs[4];
    double ms = (1.0 + 4.0 + 9.0 + 0.25) / 4.0, inv = 1.0 / sqrt(ms + 1e-5);
    colibri_reference_rmsnorm(out, x, w, 4, 1e-5f);
    for (int i = 0; i < 4; i++) {
        CHECK(fabs(out[i] - w[i] * x[i] * inv) < 1e-6);
    }
    colibri_reference_softmax(sm, 3);
    CHECK(fabs(sm[0] + sm[1] + sm[2] - 1.0) < 1e-6 && sm[2] > sm[1] && sm[1] > sm[0]);
    colibri_reference_rope_table(cs, 0, 4, 10000.0f);
    colibri_reference_rope_apply(head, cs, 4);
    CHECK(head[0] == 1.0f && head[1] == 2.0f && head[2] == 3.0f && head[3] == 4.0f);
    colibri_reference_rope_table(cs, 3, 4, 10000.0f);
    CHECK(fabs(cs[0] - cos(3.0)) < 1e-6 && fabs(cs[2] - sin(3.0)) < 1e-6);
    CHECK(fabs(cs[1] - cos(3.0 / 100.0)) < 1e-6);
    CHECK(fabs(colibri_reference_sigmoid(0.0f) - 0.5f) < 1e-7);
}

static void test_init_arguments(void)
{
    static uint32_t storage[128];
    uint8_t *bytes = (uint8_t *)storage;
    colibri_model model;
    memset(storage, 0, sizeof storage);
    CHECK(colibri_init(NULL, storage, sizeof storage, NULL) == COLIBRI_E_BAD_ARGUMENT);
    CHECK(colibri_init(&model, NULL, sizeof storage, NULL) == COLIBRI_E_BAD_ARGUMENT);
    CHECK(colibri_init(&model, bytes + 1, 300, NULL) == COLIBRI_E_MISALIGNED);
    CHECK(colibri_init(&model, storage, 255, NULL) == COLIBRI_E_TRUNCATED);
    CHECK(colibri_init(&model, storage, sizeof storage, NULL) == COLIBRI_E_BAD_MAGIC);
    CHECK(model.image == NULL);
    memcpy(bytes, "COLIBRI\x1a", 8);
    bytes[8] = 2;
    CHECK(colibri_init(&model, storage, sizeof storage, NULL) == COLIBRI_E_UNSUPPORTED_VERSION);
    CHECK(colibri_state_size(&model, 16) == 0);
    CHECK(colibri_scratch_size(NULL, 16) == 0);
    CHECK(colibri_verify(&model, NULL) == COLIBRI_E_BAD_ARGUMENT);
}

/* The fingerprint is the header's u32 at byte 24 (docs/format.md 2), read
 * at any alignment after the magic and major version, nothing else. */
static void test_image_fingerprint(void)
{
    static uint8_t header[260];
    uint32_t fp = 7;
    memset(header, 0, sizeof header);
    memcpy(header + 1, "COLIBRI\x1a", 8);
    header[1 + 8] = 1; /* format major 1 */
    header[1 + 24] = 0x78;
    header[1 + 25] = 0x56;
    header[1 + 26] = 0x34;
    header[1 + 27] = 0x12;
    CHECK(colibri_image_fingerprint(header + 1, 256, &fp) == COLIBRI_OK && fp == 0x12345678u);
    fp = 7;
    CHECK(colibri_image_fingerprint(header + 1, 255, &fp) == COLIBRI_E_TRUNCATED && fp == 7u);
    CHECK(colibri_image_fingerprint(NULL, 256, &fp) == COLIBRI_E_BAD_ARGUMENT);
    CHECK(colibri_image_fingerprint(header + 1, 256, NULL) == COLIBRI_E_BAD_ARGUMENT);
    header[1 + 8] = 2;
    CHECK(colibri_image_fingerprint(header + 1, 256, &fp) == COLIBRI_E_UNSUPPORTED_VERSION);
    header[1 + 8] = 1;
    header[1 + 7] = 0x1b;
    CHECK(colibri_image_fingerprint(header + 1, 256, &fp) == COLIBRI_E_BAD_MAGIC && fp == 7u);
}

static void test_workspace_sizes_agree(void)
{
    colibri_hparams hp;
    memset(&hp, 0, sizeof hp);
    hp.hidden_size = 36;
    hp.n_heads = 6;
    hp.n_kv_heads = 2;
    hp.head_dim = 10;
    hp.dense_intermediate = 28;
    hp.expert_intermediate = 12;
    hp.shared_intermediate = 20;
    hp.n_experts = 5;
    hp.top_k = 3;
    for (uint32_t ctx = 1; ctx < 200; ctx += 37) {
        for (uint32_t batch = 1; batch <= COLIBRI_MAX_BATCH; batch += 51) {
            size_t cut = colibri_workspace_layout(&hp, ctx, batch, NULL, NULL);
            CHECK(cut == colibri_workspace_layout64(&hp, ctx, batch));
            CHECK(cut % 64u == 0);
            /* the batch forward finds is the one the scratch was sized for */
            CHECK(colibri_workspace_batch(&hp, ctx, cut) == batch);
            CHECK(colibri_workspace_batch(&hp, ctx, cut - 1u) == batch - 1u);
        }
    }
    CHECK(colibri_workspace_batch(&hp, 7, (uint64_t)1 << 40) == COLIBRI_MAX_BATCH);
    hp.n_experts = 0;
    hp.top_k = 0;
    CHECK(colibri_workspace_layout(&hp, 7, 3, NULL, NULL) == colibri_workspace_layout64(&hp, 7, 3));
}

int main(void)
{
    test_workspace_sizes_agree();
    test_crc32();
    test_crc32_every_alignment();
    test_strerror();
    test_top_k_ties();
    test_top_k_order_and_nan();
    test_sort_by_expert();
    test_argmax();
    test_kernels();
    test_init_arguments();
    test_image_fingerprint();
    return CHECK_SUMMARY();
}
