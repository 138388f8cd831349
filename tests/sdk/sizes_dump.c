/*
 * sizes_dump.c - colibri_state_size and colibri_scratch_size for a model
 * record given on the command line (no image needed: the sizes depend on the
 * record alone), for tests/sdk/test_sizes.py.
 *
 *   sizes_dump CTX HIDDEN LAYERS HEADS KV_HEADS HEAD_DIM MAX_CONTEXT DENSE EXPERT_INTER
 *              EXPERTS SHARED TOP_K BATCH
 *              [QUANTIZED[,ZERO[,SHORTCUT[,CONV[,TAPS[,HEADS,HEAD_DIM,STATE,GROUPS,DT_RANK,NONE]]]]]
 *              [Q_LORA KV_LORA V_HEAD_DIM ROPE_DIM]]
 *   prints "STATE SCRATCH"; the four MLA numbers make it an MLA record (mla 1);
 *   ZERO and SHORTCUT are zero_experts and shortcut_layers (format 1.12), CONV
 *   and TAPS conv_layers and conv_kernel (1.13: the other layers have a KV
 *   cache), then a Mamba layer's ssm_* sizes and the layers without an
 *   operator (1.14).
 */
#include <stdio.h>
#include <stdlib.h>

#include "colibri.h"

int main(int argc, char **argv)
{
    static const uint8_t image_stand_in = 0;
    colibri_model m = {0};
    uint32_t none = 0; /* layers without an operator (1.14) */
    if (argc != 14 && argc != 15 && argc != 19) {
        fprintf(stderr, "usage: sizes_dump CTX HIDDEN LAYERS HEADS KV_HEADS HEAD_DIM MAX_CONTEXT "
                        "DENSE EXPERT_INTER EXPERTS SHARED TOP_K BATCH [QUANTIZED [Q_LORA "
                        "KV_LORA V_HEAD_DIM ROPE_DIM]]\n");
        return 2;
    }
    uint32_t ctx = (uint32_t)strtoul(argv[1], NULL, 0);
    uint32_t *fields[] = {&m.hp.hidden_size,
                          &m.hp.n_layers,
                          &m.hp.n_heads,
                          &m.hp.n_kv_heads,
                          &m.hp.head_dim,
                          &m.hp.max_context,
                          &m.hp.dense_intermediate,
                          &m.hp.expert_intermediate,
                          &m.hp.n_experts,
                          &m.hp.shared_intermediate,
                          &m.hp.top_k};
    for (int i = 0; i < 11; i++) {
        *fields[i] = (uint32_t)strtoul(argv[i + 2], NULL, 0);
    }
    if (argc >= 15) {
        char *next = argv[14];
        uint32_t *flags[] = {&m.hp.quantized,
                             &m.hp.zero_experts,
                             &m.hp.shortcut_layers,
                             &m.hp.conv_layers,
                             &m.hp.conv_kernel,
                             &m.hp.ssm_heads,
                             &m.hp.ssm_head_dim,
                             &m.hp.ssm_state,
                             &m.hp.ssm_groups,
                             &m.hp.ssm_dt_rank,
                             &none,
                             &m.hp.kv_int8};
        for (int i = 0; i < 12 && *next != '\0'; i++) {
            *flags[i] = (uint32_t)strtoul(next + (i > 0 && *next == ','), &next, 0);
        }
    }
    if (argc == 19) {
        m.hp.mla = 1u;
        m.hp.q_lora_rank = (uint32_t)strtoul(argv[15], NULL, 0);
        m.hp.kv_lora_rank = (uint32_t)strtoul(argv[16], NULL, 0);
        m.hp.v_head_dim = (uint32_t)strtoul(argv[17], NULL, 0);
        m.hp.rope_dim = (uint32_t)strtoul(argv[18], NULL, 0);
    }
    m.hp.kv_layers = m.hp.n_layers - m.hp.conv_layers - none;
    m.image = &image_stand_in;
    uint32_t batch = (uint32_t)strtoul(argv[13], NULL, 0);
    size_t scratch = colibri_scratch_size_batch(&m, ctx, batch);
    if (batch == 1u && scratch != colibri_scratch_size(&m, ctx)) {
        fprintf(stderr, "colibri_scratch_size != colibri_scratch_size_batch(.., 1)\n");
        return 1;
    }
    printf("%zu %zu\n", colibri_state_size(&m, ctx), scratch);
    return 0;
}
