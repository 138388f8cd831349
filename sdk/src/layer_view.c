/*
 * layer_view.c - a layer's weight pointers for the forward pass, resolved
 * from the validated tensor table in the order of the layer description
 * (layer_tensors.c), and one expert's block.
 */
#include "layer_tensors.h"

/* The present tensors of one part, entries index on: their pointers into
 * the view. Returns the entry after them. */
static uint32_t load_part(const colibri_model *m, layer_view *view, uint32_t part, uint32_t index)
{
    for (uint32_t i = 0; i < colibri_layer_tensors_count; i++) {
        const colibri_tensor_desc *d = &colibri_layer_tensors[i];
        if (colibri_tensor_in_layer(&m->hp, d, part, view->ffn_kind)) {
            uint8_t *slot = (uint8_t *)view + d->slot;
            if (d->cols == DIM_NONE) { /* a vector: float32 */
                *(const float **)(void *)slot = tensor_data(m, index++);
            } else { /* a matrix, of its dtype */
                *(matrix_ref *)(void *)slot = tensor_matrix(m, index++);
            }
        }
    }
    return index;
}

/* The layer's entries follow the description's order, part by part
 * (checked at init): the k-th present non-expert tensor is entry first + k. */
void colibri_layer_view_load(const colibri_model *m, uint32_t layer, layer_view *view)
{
    const uint8_t *entry = m->layer_table + (size_t)layer * IMG_LAYER_ENTRY_SIZE;
    uint32_t index = colibri_rd_u32(entry + LAY_FIRST_TENSOR);
    memset(view, 0, sizeof *view);
    view->ffn_kind = colibri_rd_u32(entry + LAY_FFN_KIND);
    view->attn_kind = colibri_rd_u32(entry + LAY_ATTN_KIND);
    index = load_part(m, view, colibri_operator_part(view->attn_kind), index);
    if (view->ffn_kind == FFN_DENSE || view->ffn_kind == FFN_SHORTCUT) {
        index = load_part(m, view, PART_DENSE, index);
    }
    if (view->ffn_kind == FFN_MOE || view->ffn_kind == FFN_SHORTCUT) {
        index = load_part(m, view, PART_MOE, index);
    }
    view->first_expert = index;
}

/* A layer's class for its state: 0 attention (a KV cache), 1 recurrent
 * (rows), 2 none (attn_kind 9: nothing). */
static int state_class(const colibri_model *m, uint32_t l)
{
    uint32_t kind =
        colibri_rd_u32(m->layer_table + (size_t)l * IMG_LAYER_ENTRY_SIZE + LAY_ATTN_KIND);
    return kind == ATTN_NONE ? 2 : colibri_recurrent_kind(kind);
}

uint32_t colibri_layer_slot(const colibri_model *m, uint32_t l)
{
    uint32_t slot = 0;
    int cls;
    if (m->hp.kv_layers == m->hp.n_layers) {
        return l;
    }
    cls = state_class(m, l);
    for (uint32_t i = 0; i < l; i++) {
        slot += state_class(m, i) == cls;
    }
    return slot;
}

void colibri_expert_view_load(const colibri_model *m, const layer_view *layer, uint32_t expert,
                              expert_view *view)
{
    uint32_t per_expert = colibri_expert_tensors(&m->hp); /* 2: no gate (1.14) */
    uint32_t first = layer->first_expert + expert * per_expert, up = first + per_expert - 2u;
    const uint8_t *down = tensor_entry(m, up + 1u);
    matrix_ref none = {NULL, DTYPE_F32};
    view->gate = per_expert == 3u ? tensor_matrix(m, first) : none;
    view->up = tensor_matrix(m, up);
    view->down = tensor_matrix(m, up + 1u);
    view->block = (const uint8_t *)tensor_data(m, first);
    view->block_size =
        (size_t)(colibri_rd_u64(down + TEN_OFFSET) + colibri_rd_u64(down + TEN_SIZE) -
                 colibri_rd_u64(tensor_entry(m, first) + TEN_OFFSET));
}

static matrix_ref rebased(matrix_ref ref, const uint8_t *from, const uint8_t *to)
{
    if (ref.data != NULL) { /* no gate without one (1.14) */
        ref.data = to + ((const uint8_t *)ref.data - from);
    }
    return ref;
}

void colibri_expert_view_rebase(expert_view *view, const uint8_t *block)
{
    view->gate = rebased(view->gate, view->block, block);
    view->up = rebased(view->up, view->block, block);
    view->down = rebased(view->down, view->block, block);
    view->block = block;
}
