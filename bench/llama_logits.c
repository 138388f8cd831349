/* llama_logits: the next-token logits llama.cpp computes at every position of
 * a token sequence, for colibri-bench's fidelity columns. Not part of
 * Colibri: colibri-bench compiles it against the peer's own llama.h and
 * libllama (tools/colibri_tools/bench/bench_llama.py, llama_logits()).
 *
 *   llama_logits MODEL.gguf OUT.f32 THREADS VOCAB ID [ID ...]
 *
 * Runs the ids in one batch from position 0 and writes n_ids x VOCAB float32
 * (row i: the logits after ids[0..i]) to OUT.f32. Exit 0 on success, 1 when
 * llama.cpp fails, 2 on bad arguments. */
#include <stdio.h>
#include <stdlib.h>

#include "llama.h"

static void quiet(enum ggml_log_level level, const char *text, void *user)
{
    (void)level;
    (void)text;
    (void)user;
}

static int parse_int(const char *text, long low, long high, long *out)
{
    char *end;
    long v = strtol(text, &end, 10);
    if (end == text || *end != '\0' || v < low || v > high) {
        return 0;
    }
    *out = v;
    return 1;
}

static int write_rows(struct llama_context *ctx, const char *path, int n, long vocab)
{
    FILE *f = fopen(path, "wb");
    int i, ok = f != NULL;
    for (i = 0; ok && i < n; i++) {
        const float *row = llama_get_logits_ith(ctx, i);
        ok = row != NULL && fwrite(row, sizeof(float), (size_t)vocab, f) == (size_t)vocab;
    }
    if (f != NULL && fclose(f) != 0) {
        ok = 0;
    }
    return ok;
}

static int run(const char *model_path, const char *out, long threads, long vocab, int n, char **ids)
{
    struct llama_model *model =
        llama_model_load_from_file(model_path, llama_model_default_params());
    struct llama_context_params cp = llama_context_default_params();
    struct llama_context *ctx;
    struct llama_batch batch;
    int i, ok = 1;
    if (model == NULL) {
        fprintf(stderr, "llama_logits: cannot load %s\n", model_path);
        return 1;
    }
    cp.n_ctx = cp.n_batch = cp.n_ubatch = (uint32_t)n;
    cp.n_threads = cp.n_threads_batch = (int32_t)threads;
    ctx = llama_init_from_model(model, cp);
    batch = llama_batch_init(n, 0, 1);
    for (i = 0; i < n && ctx != NULL; i++) {
        long id;
        if (!parse_int(ids[i], 0, vocab - 1, &id)) {
            fprintf(stderr, "llama_logits: id '%s' is not 0 .. %ld\n", ids[i], vocab - 1);
            ok = 0;
            break;
        }
        batch.token[i] = (llama_token)id;
        batch.pos[i] = i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = 1;
    }
    batch.n_tokens = n;
    ok = ok && ctx != NULL && llama_decode(ctx, batch) == 0 && write_rows(ctx, out, n, vocab);
    if (!ok) {
        fprintf(stderr, "llama_logits: llama.cpp failed on %s\n", model_path);
    }
    llama_batch_free(batch);
    if (ctx != NULL) {
        llama_free(ctx);
    }
    llama_model_free(model);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    long threads, vocab;
    if (argc < 6 || !parse_int(argv[3], 1, 64, &threads) ||
        !parse_int(argv[4], 1, 1L << 24, &vocab)) {
        fprintf(stderr, "usage: llama_logits MODEL.gguf OUT.f32 THREADS VOCAB ID [ID ...]\n");
        return 2;
    }
    llama_log_set(quiet, NULL);
    llama_backend_init();
    return run(argv[1], argv[2], threads, vocab, argc - 5, argv + 5);
}
