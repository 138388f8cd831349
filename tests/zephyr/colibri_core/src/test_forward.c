/*
 * test_forward.c - the core on this target against the Linux build of the
 * same core (colibri_golden.c, written from colibri-run): logits bit for
 * bit, greedy tokens, and a refused call that changes nothing.
 */
#include <zephyr/ztest.h>

#include "colibri_test.h"

static test_run run;

ZTEST(colibri, test_logits_of_every_position_match_linux)
{
    int32_t seq[GOLDEN_SEQ_LEN];
    uint32_t max_ulp = 0;
    for (uint32_t i = 0; i < GOLDEN_SEQ_LEN; i++) {
        seq[i] = i < GOLDEN_N_PROMPT ? golden_prompt[i] : golden_tokens[i - GOLDEN_N_PROMPT];
    }
    test_run_reset(&run);
    zassert_ok(colibri_forward(&test_model, &run.state, seq, GOLDEN_SEQ_LEN, run.logits,
                               COLIBRI_LOGITS_ALL, run.scratch, sizeof run.scratch, NULL));
    uint32_t bad = test_logits_mismatches(run.logits, 0, GOLDEN_SEQ_LEN, &max_ulp);
    TC_PRINT("logits: %u of %u differ from colibri-run, at most %u ulp\n", bad,
             GOLDEN_SEQ_LEN * GOLDEN_VOCAB, max_ulp);
    zassert_equal(bad, 0, "%u logits differ from the Linux build (max %u ulp)", bad, max_ulp);
}

ZTEST(colibri, test_greedy_tokens_match_linux)
{
    int32_t next[1];
    const int32_t *ids = golden_prompt;
    uint32_t n = GOLDEN_N_PROMPT;
    test_run_reset(&run);
    for (uint32_t i = 0; i < GOLDEN_N_TOKENS; i++) {
        uint32_t position = run.state.pos + n - 1;
        uint32_t max_ulp = 0;
        zassert_ok(colibri_forward(&test_model, &run.state, ids, n, run.logits, COLIBRI_LOGITS_LAST,
                                   run.scratch, sizeof run.scratch, NULL));
        next[0] = (int32_t)colibri_argmax(run.logits, COLIBRI_MODEL_VOCAB_SIZE);
        zassert_equal(next[0], golden_tokens[i], "token %u", i);
        if (position < GOLDEN_SEQ_LEN) {
            zassert_equal(test_logits_mismatches(run.logits, position, 1, &max_ulp), 0,
                          "step %u: logits differ (max %u ulp)", i, max_ulp);
        }
        ids = next;
        n = 1;
    }
}

ZTEST(colibri, test_refused_call_changes_nothing)
{
    int32_t ids[2] = {golden_prompt[0], (int32_t)COLIBRI_MODEL_VOCAB_SIZE};
    test_run_reset(&run);
    colibri_status s = colibri_forward(&test_model, &run.state, ids, 2, run.logits,
                                       COLIBRI_LOGITS_LAST, run.scratch, sizeof run.scratch, NULL);
    zassert_equal(s, COLIBRI_E_TOKEN_OUT_OF_RANGE, "got %s", colibri_strerror(s));
    zassert_equal(run.state.pos, 0);
    s = colibri_forward(&test_model, &run.state, ids, 1, run.logits, COLIBRI_LOGITS_LAST,
                        run.scratch, 16, NULL);
    zassert_equal(s, COLIBRI_E_WORKSPACE_TOO_SMALL, "got %s", colibri_strerror(s));
    zassert_equal(run.state.pos, 0);
}
