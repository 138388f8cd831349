/* verify.c - check tensor data against the per-tensor CRC-32s on demand. */
#include "model_internal.h"

static int tensor_intact(const colibri_model *m, uint32_t index)
{
    const uint8_t *e = tensor_entry(m, index);
    const uint8_t *data = m->image + colibri_rd_u64(e + TEN_OFFSET);
    size_t size = (size_t)colibri_rd_u64(e + TEN_SIZE);
    return colibri_crc32_update(0, data, size) == colibri_rd_u32(e + TEN_CRC);
}

colibri_status colibri_verify(const colibri_model *model, uint32_t *bad_tensor)
{
    if (model == NULL || model->image == NULL) {
        return COLIBRI_E_BAD_ARGUMENT;
    }
    for (uint32_t i = 0; i < model->n_tensors; i++) {
        if (!tensor_intact(model, i)) {
            if (bad_tensor != NULL) {
                *bad_tensor = i;
            }
            return COLIBRI_E_CHECKSUM;
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
        if (!tensor_intact(model, view.first_expert + expert * EXPERT_TENSORS + k)) {
            return COLIBRI_E_CHECKSUM;
        }
    }
    return COLIBRI_OK;
}
