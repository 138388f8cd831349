/*
 * layout_dump.c - prints the tensors the core expects in one layer, from the
 * layer description (sdk/src/layer_tensors.c), for the record given on the
 * command line; tests/sdk/test_layer_tensors.py compares it with the Python
 * writer's list.
 *
 *   layout_dump KIND HIDDEN HEADS KV_HEADS HEAD_DIM DENSE EXPERT_INTER EXPERTS
 *               SHARED SHARED_GATE ATTN_BIAS QK_NORM NORM_KIND ROUTER_SCORE
 *               ZERO_EXPERTS LAYER_ROPE ROPE_DIM ATTN_KIND CONV_KERNEL
 *               [SSM_HEADS SSM_HEAD_DIM SSM_STATE SSM_GROUPS KDA_RANK DT_RANK ACTIVATION]
 *
 * KIND 2 (a shortcut layer, format 1.12) lists its dense FFN, then its MoE;
 * ATTN_KIND 4 (a short convolution layer, 1.13) its convolution first, 5 (a
 * Mamba2 or delta rule layer, 1.14, with the six sizes) its mixer; ACTIVATION 2 (1.14) drops
 * the MLPs' gates, KIND 3 the FFN (its norms too), ATTN_KIND 9 the operator.
 *
 * One line per tensor: "ROLE EXPERT ROWS COLS" (COLS 0 for a vector).
 */
#include <stdio.h>
#include <stdlib.h>

#include "layer_tensors.h"

static void print_part(const colibri_hparams *hp, uint32_t part, long expert, uint32_t kind)
{
    for (uint32_t i = 0; i < colibri_layer_tensors_count; i++) {
        const colibri_tensor_desc *d = &colibri_layer_tensors[i];
        if (colibri_tensor_in_layer(hp, d, part, kind)) {
            printf("%u %ld %u %u\n", d->role, expert, colibri_tensor_dim(hp, d->rows),
                   colibri_tensor_dim(hp, d->cols));
        }
    }
}

int main(int argc, char **argv)
{
    colibri_hparams hp = {0};
    if (argc != 20 && argc != 27) {
        fprintf(stderr,
                "usage: layout_dump KIND HIDDEN HEADS KV_HEADS HEAD_DIM DENSE "
                "EXPERT_INTER EXPERTS SHARED SHARED_GATE ATTN_BIAS QK_NORM NORM_KIND "
                "ROUTER_SCORE ZERO_EXPERTS LAYER_ROPE ROPE_DIM ATTN_KIND CONV_KERNEL "
                "[SSM_HEADS SSM_HEAD_DIM SSM_STATE SSM_GROUPS KDA_RANK DT_RANK ACTIVATION]\n");
        return 2;
    }
    uint32_t kind = (uint32_t)strtoul(argv[1], NULL, 0);
    uint32_t *fields[] = {&hp.hidden_size,
                          &hp.n_heads,
                          &hp.n_kv_heads,
                          &hp.head_dim,
                          &hp.dense_intermediate,
                          &hp.expert_intermediate,
                          &hp.n_experts,
                          &hp.shared_intermediate,
                          &hp.shared_gate,
                          &hp.attn_bias,
                          &hp.qk_norm,
                          &hp.norm_kind,
                          &hp.router_score,
                          &hp.zero_experts,
                          &hp.layer_rope,
                          &hp.rope_dim};
    uint32_t attn = (uint32_t)strtoul(argv[18], NULL, 0);
    hp.conv_kernel = (uint32_t)strtoul(argv[19], NULL, 0);
    for (int i = 0; i < 16; i++) {
        *fields[i] = (uint32_t)strtoul(argv[i + 2], NULL, 0);
    }
    if (argc == 27) {
        uint32_t *ssm[] = {&hp.ssm_heads, &hp.ssm_head_dim, &hp.ssm_state, &hp.ssm_groups,
                           &hp.kda_rank,  &hp.ssm_dt_rank,  &hp.activation};
        for (int i = 0; i < 7; i++) {
            *ssm[i] = (uint32_t)strtoul(argv[i + 20], NULL, 0);
        }
    }
    print_part(&hp, colibri_operator_part(attn), -1, kind);
    if (kind == FFN_DENSE || kind == FFN_SHORTCUT) {
        print_part(&hp, PART_DENSE, -1, kind);
    }
    if (kind == FFN_MOE || kind == FFN_SHORTCUT) {
        print_part(&hp, PART_MOE, -1, kind);
        for (uint32_t e = 0; e < hp.n_experts; e++) {
            print_part(&hp, PART_EXPERT, (long)e, kind);
        }
    }
    printf("count %u\n", colibri_layer_tensor_count(&hp, kind, attn));
    return 0;
}
