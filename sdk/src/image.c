/* image.c - colibri_init: validate an image in place (docs/format.md 4). */
#include "model_internal.h"

#define MAX_ALIGNMENT (1u << 20)

static int magic_matches(const uint8_t *img)
{
    static const char magic[] = IMG_MAGIC;
    uint32_t diff = 0;
    for (uint32_t i = 0; i < IMG_MAGIC_SIZE; i++) {
        diff |= (uint32_t)(img[HDR_MAGIC + i] ^ (uint8_t)magic[i]);
    }
    return diff == 0;
}

static colibri_status check_identity(const uint8_t *img, size_t size)
{
    if (size < IMG_HEADER_SIZE) {
        return COLIBRI_E_TRUNCATED;
    }
    if (!magic_matches(img)) {
        return COLIBRI_E_BAD_MAGIC;
    }
    if (colibri_rd_u16(img + HDR_VERSION_MAJOR) != COLIBRI_FORMAT_MAJOR ||
        (colibri_rd_u32(img + HDR_FLAGS) & ~(uint32_t)HDR_KNOWN_FLAGS) != 0) {
        return COLIBRI_E_UNSUPPORTED_VERSION;
    }
    return COLIBRI_OK;
}

static uint64_t tables_end(const uint8_t *img)
{
    return colibri_rd_u64(img + HDR_TENSOR_TABLE) +
           (uint64_t)colibri_rd_u32(img + HDR_N_TENSORS) * IMG_TENSOR_ENTRY_SIZE;
}

/* The buffer may end before the image does (only the start of it is here):
 * format 1.9's experts-last images whose routed experts the port gives. */
static int prefix_allowed(const uint8_t *img, const colibri_options *options)
{
    const colibri_port *port = options != NULL ? options->port : NULL;
    return (colibri_rd_u32(img + HDR_FLAGS) & HDR_FLAG_EXPERTS_LAST) != 0 && port != NULL &&
           port->version >= 4u && port->expert_acquire != NULL;
}

/* v1 fixes the table placement (after a header of 256 bytes, or of 512
 * with format 1.13's record extension); the offsets are still stored. */
static colibri_status check_layout(const uint8_t *img, size_t size, int prefix_ok)
{
    uint64_t n_layers = colibri_rd_u32(img + REC_N_LAYERS);
    uint64_t image_size = colibri_rd_u64(img + HDR_IMAGE_SIZE);
    uint32_t alignment = colibri_rd_u32(img + HDR_ALIGNMENT);
    int aligned_ok = alignment >= IMG_DATA_ALIGN && alignment <= MAX_ALIGNMENT &&
                     (alignment & (alignment - 1u)) == 0;

    uint32_t header = colibri_rd_u32(img + HDR_HEADER_SIZE);
    if ((header != IMG_HEADER_SIZE && header != IMG_HEADER_SIZE_EXTENDED) ||
        colibri_rd_u64(img + HDR_LAYER_TABLE) != header ||
        colibri_rd_u64(img + HDR_TENSOR_TABLE) != header + n_layers * IMG_LAYER_ENTRY_SIZE ||
        !aligned_ok) {
        return COLIBRI_E_BAD_HYPERPARAMS;
    }
    if (image_size < IMG_HEADER_SIZE || (image_size > (uint64_t)size && !prefix_ok) ||
        tables_end(img) > image_size || tables_end(img) > (uint64_t)size) {
        return COLIBRI_E_TRUNCATED;
    }
    return COLIBRI_OK;
}

static uint32_t meta_crc(const uint8_t *img)
{
    static const uint8_t zero[4] = {0, 0, 0, 0};
    uint64_t end = tables_end(img);
    uint32_t crc = colibri_crc32_update(0, img, HDR_META_CRC);
    crc = colibri_crc32_update(crc, zero, sizeof zero);
    return colibri_crc32_update(crc, img + HDR_META_CRC + 4, (size_t)(end - (HDR_META_CRC + 4)));
}

static colibri_status check_integrity(const uint8_t *img, const colibri_options *options)
{
    uint32_t stored = colibri_rd_u32(img + HDR_META_CRC);
    if (meta_crc(img) != stored) {
        return COLIBRI_E_CHECKSUM;
    }
    if (options != NULL && options->expected_fingerprint != 0 &&
        options->expected_fingerprint != stored) {
        return COLIBRI_E_CONFIG_MISMATCH;
    }
    return COLIBRI_OK;
}

static void model_fill(colibri_model *m, const uint8_t *img, size_t size,
                       const colibri_options *options)
{
    m->image = img;
    m->image_size = colibri_rd_u64(img + HDR_IMAGE_SIZE);
    m->resident_size = m->image_size < (uint64_t)size ? m->image_size : (uint64_t)size;
    m->layer_table = img + colibri_rd_u32(img + HDR_HEADER_SIZE);
    m->tensor_table = img + colibri_rd_u64(img + HDR_TENSOR_TABLE);
    m->n_tensors = colibri_rd_u32(img + HDR_N_TENSORS);
    m->fingerprint = colibri_rd_u32(img + HDR_META_CRC);
    colibri_options_apply(m, options);
}

/* Global tensors come first, in a fixed order (docs/format.md 3.1). */
static void globals_resolve(colibri_model *m)
{
    uint32_t next = 2;
    m->token_embed = tensor_data(m, 0);
    m->output_norm = tensor_data(m, 1);
    m->lm_head = m->hp.tie_embeddings ? m->token_embed : tensor_data(m, next++);
    m->output_norm_bias = m->hp.norm_kind == NORM_LAYER ? tensor_data(m, next++) : NULL;
    m->lm_head_bias = (m->hp.attn_bias & BIAS_LM_HEAD) != 0 ? tensor_data(m, next) : NULL;
}

static colibri_status init_steps(colibri_model *model, const uint8_t *img, size_t size,
                                 const colibri_options *options)
{
    colibri_status status = check_identity(img, size);
    if (status == COLIBRI_OK) {
        status = check_layout(img, size, prefix_allowed(img, options));
    }
    if (status == COLIBRI_OK) {
        status = check_integrity(img, options);
    }
    if (status == COLIBRI_OK) {
        status = colibri_hparams_decode(img, &model->hp);
    }
    if (status == COLIBRI_OK) {
        model_fill(model, img, size, options);
        status = colibri_layer_table_check(model);
    }
    if (status == COLIBRI_OK) {
        status = colibri_tensor_table_check(model, &model->hp.quantized);
    }
    return status;
}

colibri_status colibri_image_fingerprint(const void *image, size_t image_size,
                                         uint32_t *fingerprint)
{
    colibri_status status;
    if (image == NULL || fingerprint == NULL) {
        return COLIBRI_E_BAD_ARGUMENT;
    }
    status = check_identity((const uint8_t *)image, image_size);
    if (status == COLIBRI_OK) {
        *fingerprint = colibri_rd_u32((const uint8_t *)image + HDR_META_CRC);
    }
    return status;
}

colibri_status colibri_init(colibri_model *model, const void *image, size_t image_size,
                            const colibri_options *options)
{
    colibri_status status;
    if (model == NULL) {
        return COLIBRI_E_BAD_ARGUMENT;
    }
    memset(model, 0, sizeof *model);
    if (image == NULL) {
        return COLIBRI_E_BAD_ARGUMENT;
    }
    if (((uintptr_t)image & 3u) != 0) {
        return COLIBRI_E_MISALIGNED;
    }
    if (!colibri_options_valid(options)) {
        return COLIBRI_E_BAD_ARGUMENT;
    }
    status = init_steps(model, (const uint8_t *)image, image_size, options);
    if (status != COLIBRI_OK) {
        memset(model, 0, sizeof *model);
        return status;
    }
    globals_resolve(model);
    return COLIBRI_OK;
}
