/*
 * paged_moe - a model that is not in the address map, on Zephyr: the image
 * lies in a flash partition (CONFIG_COLIBRI_STORAGE: chosen colibri,storage)
 * and is read through the flash API. Its start (all but the routed experts,
 * COLIBRI_MODEL_RESIDENT_BYTES) goes into RAM, and the routed experts, as
 * the router picks them, into the core's expert cache (docs/core.md, "An
 * expert cache in caller memory"; docs/zephyr.md, "Experts from a flash
 * partition"). The model must have been converted with --experts-last.
 *
 * Runs the prompt ids[i] = (7 i + 3) mod vocab, 8 ids, prints the CRC-32
 * of each row of its logits ("logits ROW crc=..."), then decodes
 * CONFIG_PAGED_MOE_GENERATE
 * tokens greedily, one line per token with the cache's reads for it, then
 * the totals and "done" (the lines of samples/baremetal/paged_moe).
 */
#include <zephyr/kernel.h>
#include <zephyr/sys/printk.h>

#include "colibri.h"
#include "colibri_zephyr.h"
#include "model_config.h"

#define N_IDS 8u
#define SLOTS (CONFIG_PAGED_MOE_SLOTS > 0 ? CONFIG_PAGED_MOE_SLOTS : COLIBRI_MODEL_N_EXPERT_BLOCKS)

BUILD_ASSERT(COLIBRI_MODEL_CONTEXT >= N_IDS + CONFIG_PAGED_MOE_GENERATE,
             "model context too small for the prompt and CONFIG_PAGED_MOE_GENERATE");
BUILD_ASSERT(COLIBRI_MODEL_RESIDENT_BYTES < COLIBRI_MODEL_IMAGE_SIZE,
             "the model's routed experts are not last: convert it with --experts-last");
BUILD_ASSERT(CONFIG_MAIN_STACK_SIZE >= CONFIG_COLIBRI_STACK_SIZE + 1024,
             "CONFIG_MAIN_STACK_SIZE too small for colibri_forward and printk");

static __aligned(64) uint8_t image_start[COLIBRI_MODEL_RESIDENT_BYTES];
static __aligned(64) uint8_t arena[COLIBRI_MODEL_EXPERT_CACHE_BYTES(SLOTS)];
static __aligned(16) uint8_t kv_memory[COLIBRI_MODEL_STATE_BYTES];
static __aligned(16) uint8_t scratch[COLIBRI_MODEL_SCRATCH_BYTES];
static float logits[N_IDS * COLIBRI_MODEL_VOCAB_SIZE];
static colibri_model model;
static colibri_state state;
static colibri_expert_cache cache;
static colibri_port port;

static int fail(const char *what, const char *why)
{
    printk("paged_moe: %s: %s\n", what, why);
    return 1;
}

static int load(void)
{
    int64_t size = colibri_zephyr_storage_open();
    colibri_options options = {COLIBRI_MODEL_FINGERPRINT, &port};
    colibri_expert_cache_config config = {colibri_zephyr_storage_read, NULL, NULL, 0,
                                          COLIBRI_EXPERT_CACHE_VERIFY};
    colibri_status status;
    if (size < (int64_t)COLIBRI_MODEL_IMAGE_SIZE) {
        return fail("storage", size < 0 ? "no partition" : "partition smaller than the image");
    }
    if (colibri_zephyr_storage_read(NULL, 0, image_start, sizeof image_start) != 0) {
        return fail("storage", "the image's start cannot be read");
    }
    port = *colibri_zephyr_port();
    colibri_expert_cache_port(&cache, &port);
    status = colibri_init(&model, image_start, sizeof image_start, &options);
    if (status == COLIBRI_OK) {
        status = colibri_verify(&model, NULL);
    }
    if (status != COLIBRI_OK) {
        return fail("model image", colibri_strerror(status));
    }
    status = colibri_expert_cache_init(&cache, &model, arena, sizeof arena, &config);
    if (status != COLIBRI_OK) {
        return fail("expert cache", colibri_strerror(status));
    }
    printk("paged: image=%llu resident=%llu slots=%u pinned=0 slot_bytes=%u arena=%u\n",
           (unsigned long long)model.image_size, (unsigned long long)model.resident_size,
           cache.n_slots, (unsigned)cache.slot_bytes, (unsigned)sizeof arena);
    return colibri_state_init(&state, &model, kv_memory, sizeof kv_memory, COLIBRI_MODEL_CONTEXT) ==
                   COLIBRI_OK
               ? 0
               : fail("state", "refused");
}

static int forward(const int32_t *ids, uint32_t n, colibri_logits_mode mode)
{
    colibri_status status =
        colibri_forward(&model, &state, ids, n, logits, mode, scratch, sizeof scratch, NULL);
    if (status != COLIBRI_OK) {
        printk("paged_moe: forward: %s layer=%u expert=%u read_error=%d\n",
               colibri_strerror(status), cache.stats.last_layer, cache.stats.last_expert,
               cache.stats.last_read_error);
        return 1;
    }
    return 0;
}

/* Each prompt row's logits as the CRC-32 of its float32 bytes (a digest:
 * Zephyr's console breaks lines as long as the rows in hex). */
static void print_logits(void)
{
    for (uint32_t row = 0; row < N_IDS; row++) {
        const float *values = &logits[row * COLIBRI_MODEL_VOCAB_SIZE];
        printk("logits %u crc=0x%08x\n", row,
               colibri_crc32_update(0, (const uint8_t *)values,
                                    COLIBRI_MODEL_VOCAB_SIZE * sizeof(float)));
    }
}

static int decode(void)
{
    int32_t ids[N_IDS], next;
    for (uint32_t i = 0; i < N_IDS; i++) {
        ids[i] = (int32_t)((7u * i + 3u) % COLIBRI_MODEL_VOCAB_SIZE);
    }
    if (forward(ids, N_IDS, COLIBRI_LOGITS_ALL)) {
        return 1;
    }
    print_logits();
    next = (int32_t)colibri_argmax(logits + (N_IDS - 1u) * COLIBRI_MODEL_VOCAB_SIZE,
                                   COLIBRI_MODEL_VOCAB_SIZE);
    for (uint32_t t = 0; t < CONFIG_PAGED_MOE_GENERATE; t++) {
        uint64_t bytes = cache.stats.bytes_read, hits = cache.stats.hits;
        uint64_t acquires = cache.stats.acquires;
        printk("token %u id=%d", t, (int)next);
        if (t + 1u < CONFIG_PAGED_MOE_GENERATE) {
            if (forward(&next, 1, COLIBRI_LOGITS_LAST)) {
                return 1;
            }
            printk(" bytes_read=%llu hits=%llu acquires=%llu",
                   (unsigned long long)(cache.stats.bytes_read - bytes),
                   (unsigned long long)(cache.stats.hits - hits),
                   (unsigned long long)(cache.stats.acquires - acquires));
            next = (int32_t)colibri_argmax(logits, COLIBRI_MODEL_VOCAB_SIZE);
        }
        printk("\n");
    }
    return 0;
}

int main(void)
{
    printk("paged_moe on %s\n", CONFIG_BOARD_TARGET);
    if (load() || decode()) {
        return 1;
    }
    printk("cache: acquires=%llu hits=%llu reads=%u bytes_read=%llu failures=%u\n",
           (unsigned long long)cache.stats.acquires, (unsigned long long)cache.stats.hits,
           cache.stats.reads, (unsigned long long)cache.stats.bytes_read, cache.stats.failures);
    printk("done\n");
    return 0;
}
