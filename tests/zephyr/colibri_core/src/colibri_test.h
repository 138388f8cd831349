/*
 * colibri_test.h - what the test files of the suite share: one model,
 * initialised once by the suite setup, and buffers sized by model_config.h.
 */
#ifndef COLIBRI_TEST_H
#define COLIBRI_TEST_H

#include <stdint.h>

#include "colibri.h"
#include "colibri_golden.h"
#include "model_config.h"

/* One forward context: state, scratch and logits for every golden position. */
typedef struct test_run {
    colibri_state state;
    __aligned(16) uint8_t kv[COLIBRI_MODEL_STATE_BYTES];
    __aligned(16) uint8_t scratch[COLIBRI_MODEL_SCRATCH_BYTES];
    float logits[GOLDEN_SEQ_LEN * COLIBRI_MODEL_VOCAB_SIZE];
} test_run;

extern colibri_model test_model;

/* Empty run r's state (the model must be initialised). */
void test_run_reset(test_run *r);

/* Positions of got[0 .. n) whose bits differ from golden_logits_bits
 * starting at position first; *max_ulp receives the largest distance. */
uint32_t test_logits_mismatches(const float *got, uint32_t first, uint32_t n, uint32_t *max_ulp);

#endif
