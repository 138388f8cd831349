/* verify.c - check tensor data against the per-tensor CRC-32s, and the
 * scales of quantized tensors, on demand (docs/format.md 3.3, 4). */
#include "layer_tensors.h"

/* Tensor `index`'s data as read at `data` (its place in the image, or a
 * copy of it) matches the table's CRC-32. */
static int tensor_intact(const colibri_model *m, uint32_t index, const uint8_t *data)
{
    const uint8_t *e = tensor_entry(m, index);
    size_t size = (size_t)colibri_rd_u64(e + TEN_SIZE);
    return colibri_crc32_update(0, data, size) == colibri_rd_u32(e + TEN_CRC);
}

/* Every block's binary16 scale of a quantized tensor is finite (exponent
 * bits not all ones): the first 2 bytes of each block, the first 32 of each
 * tile of 16 (R16 dtypes), d and dmin, the first 4 of each super-block
 * (QK dtypes) and the first 64 of each tile of them (QK R16: the 16 d, then
 * the 16 dmin); float32 tensors have no scales. */
static int scales_finite(const colibri_model *m, uint32_t index, const uint8_t *data)
{
    const uint8_t *e = tensor_entry(m, index);
    uint32_t dtype = colibri_rd_u16(e + TEN_DTYPE);
    uint64_t size = colibri_rd_u64(e + TEN_SIZE);
    uint32_t tile = dtype_row_groups(dtype) ? COLIBRI_QGROUP_ROWS : 1u;
    uint32_t scales = dtype_superblocks(dtype) ? 2u * tile : tile;
    uint64_t step = (uint64_t)dtype_block_bytes(dtype) * tile;
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

/* Tensor `index` read at `data`; NULL: in the image. */
static colibri_status tensor_check_data(const colibri_model *m, uint32_t index, const uint8_t *data)
{
    if (data == NULL) {
        data = m->image + colibri_rd_u64(tensor_entry(m, index) + TEN_OFFSET);
    }
    if (!tensor_intact(m, index, data)) {
        return COLIBRI_E_CHECKSUM;
    }
    return scales_finite(m, index, data) ? COLIBRI_OK : COLIBRI_E_QUANT_SCALE;
}

/* Tensor `index` lies in the buffer colibri_init was given (not so the
 * expert blocks of a 1.9 image given in part: colibri_verify_expert_block
 * checks each where the port read it). */
static int tensor_resident(const colibri_model *m, uint32_t index)
{
    const uint8_t *e = tensor_entry(m, index);
    return colibri_rd_u64(e + TEN_OFFSET) + colibri_rd_u64(e + TEN_SIZE) <= m->resident_size;
}

colibri_status colibri_verify(const colibri_model *model, uint32_t *bad_tensor)
{
    if (model == NULL || model->image == NULL) {
        return COLIBRI_E_BAD_ARGUMENT;
    }
    for (uint32_t i = 0; i < model->n_tensors; i++) {
        colibri_status status =
            tensor_resident(model, i) ? tensor_check_data(model, i, NULL) : COLIBRI_OK;
        if (status != COLIBRI_OK) {
            if (bad_tensor != NULL) {
                *bad_tensor = i;
            }
            return status;
        }
    }
    return COLIBRI_OK;
}

/* Expert `expert` of MoE layer `layer`: its view (COLIBRI_OK), or
 * COLIBRI_E_BAD_ARGUMENT. */
static colibri_status routed_expert(const colibri_model *model, uint32_t layer, uint32_t expert,
                                    layer_view *lv, expert_view *ev)
{
    if (model == NULL || model->image == NULL || layer >= model->hp.n_layers ||
        expert >= model->hp.n_experts) {
        return COLIBRI_E_BAD_ARGUMENT;
    }
    colibri_layer_view_load(model, layer, lv);
    if (lv->ffn_kind != FFN_MOE && lv->ffn_kind != FFN_SHORTCUT) {
        return COLIBRI_E_BAD_ARGUMENT; /* no experts: dense, or no FFN (1.14) */
    }
    colibri_expert_view_load(model, lv, expert, ev);
    return COLIBRI_OK;
}

colibri_status colibri_expert_block(const colibri_model *model, uint32_t layer, uint32_t expert,
                                    uint64_t *offset, size_t *size)
{
    layer_view lv;
    expert_view ev;
    colibri_status status = routed_expert(model, layer, expert, &lv, &ev);
    if (status == COLIBRI_OK && offset != NULL) {
        *offset = (uint64_t)(ev.block - model->image);
    }
    if (status == COLIBRI_OK && size != NULL) {
        *size = ev.block_size;
    }
    return status;
}

/* The gate, up and down tensors of the expert, read at block (NULL: in the
 * image, COLIBRI_E_EXPERT_UNAVAILABLE past the part colibri_init was given). */
static colibri_status check_expert(const colibri_model *model, uint32_t layer, uint32_t expert,
                                   const uint8_t *block)
{
    layer_view lv;
    expert_view ev;
    colibri_status status = routed_expert(model, layer, expert, &lv, &ev);
    if (status == COLIBRI_OK && block == NULL &&
        (uint64_t)(ev.block - model->image) + ev.block_size > model->resident_size) {
        return COLIBRI_E_EXPERT_UNAVAILABLE; /* verify the copy: colibri_verify_expert_block */
    }
    uint32_t per_expert = colibri_expert_tensors(&model->hp);
    for (uint32_t k = 0; status == COLIBRI_OK && k < per_expert; k++) {
        uint32_t index = lv.first_expert + expert * per_expert + k;
        const uint8_t *data = NULL;
        if (block != NULL) {
            uint64_t at = colibri_rd_u64(tensor_entry(model, index) + TEN_OFFSET);
            data = block + (at - (uint64_t)(ev.block - model->image));
        }
        status = tensor_check_data(model, index, data);
    }
    return status;
}

colibri_status colibri_verify_expert(const colibri_model *model, uint32_t layer, uint32_t expert)
{
    return check_expert(model, layer, expert, NULL);
}

colibri_status colibri_verify_expert_block(const colibri_model *model, uint32_t layer,
                                           uint32_t expert, const void *block)
{
    if (block == NULL) {
        return COLIBRI_E_BAD_ARGUMENT;
    }
    return check_expert(model, layer, expert, (const uint8_t *)block);
}
