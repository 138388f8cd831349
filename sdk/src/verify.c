/* verify.c - check tensor data against the per-tensor CRC-32s, and the
 * scales of quantized tensors, on demand (docs/format.md 3.3, 4). */
#include "model_internal.h"

static int tensor_intact(const colibri_model *m, uint32_t index)
{
    const uint8_t *e = tensor_entry(m, index);
    const uint8_t *data = m->image + colibri_rd_u64(e + TEN_OFFSET);
    size_t size = (size_t)colibri_rd_u64(e + TEN_SIZE);
    return colibri_crc32_update(0, data, size) == colibri_rd_u32(e + TEN_CRC);
}

/* Every block's binary16 scale of a quantized tensor is finite (exponent
 * bits not all ones): the first 2 bytes of each block, or the first 32 of
 * each tile of 16 (R16 dtypes); float32 tensors have no scales. */
static int scales_finite(const colibri_model *m, uint32_t index)
{
    const uint8_t *e = tensor_entry(m, index);
    uint32_t dtype = colibri_rd_u16(e + TEN_DTYPE);
    const uint8_t *data = m->image + colibri_rd_u64(e + TEN_OFFSET);
    uint64_t size = colibri_rd_u64(e + TEN_SIZE);
    uint32_t scales = dtype_row_groups(dtype) ? COLIBRI_QGROUP_ROWS : 1u;
    uint64_t step = (uint64_t)dtype_block_bytes(dtype) * scales;
    if (dtype == DTYPE_F32) {
        return 1;
    }
    for (uint64_t at = 0; at < size; at += step) {
        for (uint32_t i = 0; i < scales; i++) {
            if ((colibri_rd_u16(data + at + 2u * i) & 0x7C00u) == 0x7C00u) {
                return 0;
            }
        }
    }
    return 1;
}

static colibri_status tensor_check_data(const colibri_model *m, uint32_t index)
{
    if (!tensor_intact(m, index)) {
        return COLIBRI_E_CHECKSUM;
    }
    return scales_finite(m, index) ? COLIBRI_OK : COLIBRI_E_QUANT_SCALE;
}

colibri_status colibri_verify(const colibri_model *model, uint32_t *bad_tensor)
{
    if (model == NULL || model->image == NULL) {
        return COLIBRI_E_BAD_ARGUMENT;
    }
    for (uint32_t i = 0; i < model->n_tensors; i++) {
        colibri_status status = tensor_check_data(model, i);
        if (status != COLIBRI_OK) {
            if (bad_tensor != NULL) {
                *bad_tensor = i;
            }
            return status;
        }
    }
    return COLIBRI_OK;
}

colibri_status colibri_verify_expert(const colibri_model *model, uint32_t layer, uint32_t expert)
{
    layer_view view;
    if (model == NULL || model->image == NULL || layer >= model->hp.n_layers ||
        expert >= model->hp.n_experts) {
        return COLIBRI_E_BAD_ARGUMENT;
    }
    colibri_layer_view_load(model, layer, &view);
    if (view.ffn_kind != FFN_MOE) {
        return COLIBRI_E_BAD_ARGUMENT;
    }
    for (uint32_t k = 0; k < EXPERT_TENSORS; k++) {
        colibri_status status =
            tensor_check_data(model, view.first_expert + expert * EXPERT_TENSORS + k);
        if (status != COLIBRI_OK) {
            return status;
        }
    }
    return COLIBRI_OK;
}
