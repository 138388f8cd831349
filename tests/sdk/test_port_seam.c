/*
 * test_port_seam.c - colibri_port as a seam that grows: a port written for
 * version 1 (a struct that ends before the version-2 slots, in a heap block of
 * exactly that size, so AddressSanitizer sees any read past it) still works;
 * versions 0 and COLIBRI_PORT_VERSION + 1 are refused, and so is a version-4
 * port with only one of expert_acquire and expert_release; a version-2 port's
 * kernel table overrides one slot and the rest stay the reference's, with the
 * same logits bit for bit; a version-2 port (ending before the route slots)
 * works the same; a version-3 router observer hears of every MoE layer of
 * every position once, with top_k ascending experts whose weights are those
 * the forward pass used, and changes no bit of the logits; a version-5 port
 * (ending before the router slot) works the same, and a version-6 router that
 * fails ends the call with COLIBRI_E_ROUTER_FAILED, one that picks an expert
 * out of range with COLIBRI_E_BAD_ROUTE.
 *
 *   test_port_seam MODEL.bin        prints one line per failure and "N passed, M failed"
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "colibri.h"

#include "check.h"

static unsigned ticks_calls, add_calls;

static const void *no_block(void *ctx, uint32_t layer, uint32_t expert, uint64_t offset,
                            size_t size)
{
    (void)ctx, (void)layer, (void)expert, (void)offset, (void)size;
    return NULL;
}

static void no_release(void *ctx, uint32_t layer, uint32_t expert)
{
    (void)ctx, (void)layer, (void)expert;
}

static int failing_router(void *ctx, uint32_t layer, uint32_t n_tokens, uint32_t hidden,
                          const float *x, uint32_t top_k, uint32_t *experts, float *weights)
{
    (void)ctx, (void)layer, (void)n_tokens, (void)hidden, (void)x, (void)top_k;
    (void)experts, (void)weights;
    return 1;
}

/* A router that picks expert n_experts (out of range) for every choice. */
static int out_of_range_router(void *ctx, uint32_t layer, uint32_t n_tokens, uint32_t hidden,
                               const float *x, uint32_t top_k, uint32_t *experts, float *weights)
{
    const colibri_model *m = (const colibri_model *)ctx;
    (void)layer, (void)hidden, (void)x;
    for (uint32_t i = 0; i < n_tokens * top_k; i++) {
        experts[i] = m->hp.n_experts + m->hp.zero_experts;
        weights[i] = 0.5f;
    }
    return 0;
}

static uint64_t count_ticks(void *ctx)
{
    (void)ctx;
    return ++ticks_calls;
}

static void counting_add(float *y, const float *x, uint32_t n)
{
    add_calls++;
    colibri_kernels_reference.add(y, x, n);
}

typedef struct route_log {
    uint32_t calls, positions, bad;
    uint32_t seen[64][64]; /* [layer][pos]: calls that covered it (ctx <= 64) */
} route_log;

static route_log g_routes;

static void log_route(void *ctx, uint32_t layer, uint32_t pos, uint32_t n_tokens, uint32_t top_k,
                      const uint32_t *experts, const float *weights)
{
    route_log *log = (route_log *)ctx;
    log->calls++;
    for (uint32_t t = 0; t < n_tokens; t++) {
        float sum = 0.0f;
        if (layer < 64u && pos + t < 64u) {
            log->seen[layer][pos + t]++;
        }
        log->positions++;
        for (uint32_t j = 0; j < top_k; j++) {
            sum += weights[t * top_k + j];
            if (j > 0 && experts[t * top_k + j] <= experts[t * top_k + j - 1]) {
                log->bad++; /* not ascending, or repeated */
            }
        }
        if (!(sum > 0.0f)) {
            log->bad++;
        }
    }
}

static unsigned char *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    unsigned char *data = NULL;
    long length;
    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (length = ftell(f)) <= 0 ||
        fseek(f, 0, SEEK_SET) != 0) {
        if (f != NULL) {
            fclose(f);
        }
        return NULL;
    }
    data = aligned_alloc(64, ((size_t)length + 63u) / 64u * 64u);
    if (data != NULL && fread(data, 1, (size_t)length, f) != (size_t)length) {
        free(data);
        data = NULL;
    }
    fclose(f);
    *size = (size_t)length;
    return data;
}

/* Logits of a 3-token prompt; 0 on success. */
static int run(const colibri_model *m, float *logits)
{
    uint32_t ctx = 4;
    size_t kv_size = colibri_state_size(m, ctx), work_size = colibri_scratch_size(m, ctx);
    void *kv = aligned_alloc(16, (kv_size + 15u) / 16u * 16u);
    void *work = aligned_alloc(16, (work_size + 15u) / 16u * 16u);
    int32_t ids[3] = {1, 2, 3};
    uint64_t ticks = 0;
    colibri_state state;
    int status = (int)colibri_state_init(&state, m, kv, kv_size, ctx);
    if (status == 0) {
        status = (int)colibri_forward(m, &state, ids, 3, logits, COLIBRI_LOGITS_LAST, work,
                                      work_size, &ticks);
    }
    free(kv);
    free(work);
    return status;
}

int main(int argc, char **argv)
{
    size_t size = 0, v1_size = offsetof(colibri_port, parallel_for);
    unsigned char *image = argc > 1 ? read_file(argv[1], &size) : NULL;
    colibri_model model;
    if (image == NULL) {
        fprintf(stderr, "usage: test_port_seam MODEL.bin (a readable model image)\n");
        return 2;
    }
    colibri_init(&model, image, size, NULL);
    float *ref = malloc((size_t)model.hp.vocab_size * sizeof(float));
    float *got = malloc((size_t)model.hp.vocab_size * sizeof(float));
    CHECK(run(&model, ref) == 0 && !strcmp(model.kernels.name, "reference"));

    /* A version-1 port: only version, ticks, prefetch and ctx exist. */
    colibri_port *v1 = malloc(v1_size);
    memset(v1, 0, v1_size);
    v1->version = 1;
    v1->ticks = count_ticks;
    colibri_options options = {0, v1};
    CHECK(colibri_init(&model, image, size, &options) == COLIBRI_OK);
    CHECK(model.port.ticks == count_ticks && model.port.parallel_for == NULL &&
          model.port.kernels == NULL);
    CHECK(run(&model, got) == 0 && ticks_calls >= 2 && !memcmp(ref, got, model.hp.vocab_size * 4));
    v1->version = 0;
    CHECK(colibri_init(&model, image, size, &options) == COLIBRI_E_BAD_ARGUMENT);
    free(v1);

    /* A version-2 port whose table overrides one slot. */
    colibri_kernels one_slot = {.name = "counting-add", .add = counting_add};
    colibri_port v2 = {.version = COLIBRI_PORT_VERSION, .kernels = &one_slot};
    options.port = &v2;
    CHECK(colibri_init(&model, image, size, &options) == COLIBRI_OK);
    CHECK(model.kernels.add == counting_add && model.kernels.dot == colibri_kernels_reference.dot &&
          model.kernels.matvec_f32 == colibri_kernels_reference.matvec_f32);
    CHECK(run(&model, got) == 0 && add_calls > 0 && !memcmp(ref, got, model.hp.vocab_size * 4));
    v2.version = COLIBRI_PORT_VERSION + 1u;
    CHECK(colibri_init(&model, image, size, &options) == COLIBRI_E_BAD_ARGUMENT);
    /* Version 4: expert_acquire without expert_release (or the other way
     * round) is refused; a version-3 port's bytes there are never read. */
    colibri_port half = {.version = 4, .expert_acquire = no_block};
    options.port = &half;
    CHECK(colibri_init(&model, image, size, &options) == COLIBRI_E_BAD_ARGUMENT);
    half.expert_acquire = NULL;
    half.expert_release = no_release;
    CHECK(colibri_init(&model, image, size, &options) == COLIBRI_E_BAD_ARGUMENT);
    half.version = 3;
    CHECK(colibri_init(&model, image, size, &options) == COLIBRI_OK);
    options.port = &v2;

    /* A version-2 port in a block that ends before the version-3 slots. */
    size_t v2_size = offsetof(colibri_port, route);
    colibri_port *v2_exact = malloc(v2_size);
    memset(v2_exact, 0, v2_size);
    v2_exact->version = 2;
    v2_exact->kernels = &colibri_kernels_reference;
    options.port = v2_exact;
    CHECK(colibri_init(&model, image, size, &options) == COLIBRI_OK && model.port.route == NULL);
    CHECK(run(&model, got) == 0 && !memcmp(ref, got, model.hp.vocab_size * 4));
    free(v2_exact);

    /* A version-3 router observer: every MoE layer of each of the 3 prompt
     * positions once, ascending experts, positive weights, same logits. */
    colibri_port v3 = {.version = 3, .route = log_route, .route_ctx = &g_routes};
    options.port = &v3;
    CHECK(colibri_init(&model, image, size, &options) == COLIBRI_OK);
    CHECK(run(&model, got) == 0 && !memcmp(ref, got, model.hp.vocab_size * 4));
    CHECK(g_routes.calls > 0 && g_routes.bad == 0);
    for (uint32_t l = 0; l < model.hp.n_layers && l < 64u; l++) {
        for (uint32_t p = 0; p < 3u; p++) {
            CHECK(g_routes.seen[l][p] <= 1u);
        }
    }
    CHECK(g_routes.positions % 3u == 0 && g_routes.positions <= 3u * model.hp.n_layers);
    v3.version = 2; /* a version-2 port's route slot is never read */
    memset(&g_routes, 0, sizeof g_routes);
    CHECK(colibri_init(&model, image, size, &options) == COLIBRI_OK && model.port.route == NULL);
    CHECK(run(&model, got) == 0 && g_routes.calls == 0);
    /* Version 5's attention observer: a version-4 port's slot is never read. */
    colibri_port v4 = {.version = 4, .attention_route = log_route, .route_ctx = &g_routes};
    options.port = &v4;
    CHECK(colibri_init(&model, image, size, &options) == COLIBRI_OK &&
          model.port.attention_route == NULL);
    v4.version = 5;
    CHECK(colibri_init(&model, image, size, &options) == COLIBRI_OK &&
          model.port.attention_route == log_route);
    /* Version 6's router: a version-5 port's slot is never read (a block that
     * ends before it); a router that always fails gives its status, and
     * nothing of the call is left in the state. */
    size_t v5_size = offsetof(colibri_port, router);
    colibri_port *v5_exact = malloc(v5_size);
    memset(v5_exact, 0, v5_size);
    v5_exact->version = 5;
    options.port = v5_exact;
    CHECK(colibri_init(&model, image, size, &options) == COLIBRI_OK && model.port.router == NULL);
    CHECK(run(&model, got) == 0 && !memcmp(ref, got, model.hp.vocab_size * 4));
    free(v5_exact);
    colibri_port v6 = {.version = 6, .router = failing_router};
    options.port = &v6;
    CHECK(colibri_init(&model, image, size, &options) == COLIBRI_OK);
    CHECK(run(&model, got) == (model.hp.n_experts > 0u ? COLIBRI_E_ROUTER_FAILED : 0));
    v6.router = out_of_range_router;
    v6.ctx = &model;
    CHECK(colibri_init(&model, image, size, &options) == COLIBRI_OK);
    CHECK(run(&model, got) == (model.hp.n_experts > 0u ? COLIBRI_E_BAD_ROUTE : 0));

    free(ref);
    free(got);
    free(image);
    return CHECK_SUMMARY();
}
