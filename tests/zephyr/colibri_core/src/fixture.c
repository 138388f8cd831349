/*
 * fixture.c - the suite: the model is initialised once, from the weights
 * region, before any test runs.
 */
#include <string.h>

#include <zephyr/ztest.h>

#include "colibri_test.h"
#include "colibri_zephyr.h"

BUILD_ASSERT(GOLDEN_VOCAB == COLIBRI_MODEL_VOCAB_SIZE, "golden values from another model");
BUILD_ASSERT(GOLDEN_SEQ_LEN <= COLIBRI_MODEL_CONTEXT, "model context too small for the test");

colibri_model test_model;

void test_run_reset(test_run *r)
{
    zassert_ok(
        colibri_state_init(&r->state, &test_model, r->kv, sizeof r->kv, COLIBRI_MODEL_CONTEXT));
}

static uint32_t ulp_distance(uint32_t a, uint32_t b)
{
    /* Map the sign-magnitude bit patterns onto a monotonic integer line. */
    int64_t ia = (a & 0x80000000u) ? -(int64_t)(a & 0x7FFFFFFFu) : (int64_t)a;
    int64_t ib = (b & 0x80000000u) ? -(int64_t)(b & 0x7FFFFFFFu) : (int64_t)b;
    int64_t d = ia > ib ? ia - ib : ib - ia;
    return d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
}

uint32_t test_logits_mismatches(const float *got, uint32_t first, uint32_t n, uint32_t *max_ulp)
{
    uint32_t bad = 0;
    *max_ulp = 0;
    for (uint32_t i = 0; i < n * GOLDEN_VOCAB; i++) {
        uint32_t bits;
        memcpy(&bits, &got[i], sizeof bits);
        uint32_t want = golden_logits_bits[first * GOLDEN_VOCAB + i];
        if (bits != want) {
            bad++;
            *max_ulp = MAX(*max_ulp, ulp_distance(bits, want));
        }
    }
    return bad;
}

static void *suite_setup(void)
{
    colibri_options options = {COLIBRI_MODEL_FINGERPRINT, colibri_zephyr_port()};
    colibri_status s = colibri_init(&test_model, colibri_zephyr_weights(),
                                    colibri_zephyr_weights_size(), &options);
    zassert_equal(s, COLIBRI_OK, "colibri_init at 0x%lx: %s",
                  (unsigned long)COLIBRI_ZEPHYR_WEIGHTS_ADDRESS, colibri_strerror(s));
    return NULL;
}

ZTEST_SUITE(colibri, NULL, suite_setup, NULL, NULL, NULL);
