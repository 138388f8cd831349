"""Tiny Hugging Face MoE models with random weights, for tests (no hub, no network).

    model, config = build_model("qwen2_moe", seed=0, norm_topk_prob=True)
    save_checkpoint(model, tmp_path / "hf", layout="fused", shards=3, dtype="bfloat16")

Weights are rescaled so every part matters: the default 0.02-std init makes
attention and experts negligible and hides router bugs. Here linear weights are
N(0, 1/in_features), norm weights 1 + 0.2 N(0, 1), router weights large enough
that tokens pick different experts, embeddings N(0, 1), biases N(0, 0.1); the
logits come out with a standard deviation of order 1.

The default configs have awkward shapes on purpose: hidden sizes 36 and 44,
head_dim != hidden / heads (mixtral, qwen3_moe), 5 experts with top-3 (mixtral),
odd vocabularies, GQA everywhere, dense layers (qwen2_moe via mlp_only_layers,
qwen3_moe via decoder_sparse_step), biases (qwen2_moe q/k/v, olmoe q/k/v/o),
norms after the sublayers (flex_olmo), q/k norms after RoPE (hunyuan_v1_moe),
norms before and after them and a gated attention output (afmoe), q/k/v clamped
(dbrx).
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from transformers import (
    AfmoeConfig,
    AfmoeForCausalLM,
    BailingHybridConfig,
    BailingHybridForCausalLM,
    DbrxConfig,
    DbrxForCausalLM,
    DeepseekV2Config,
    DeepseekV2ForCausalLM,
    DeepseekV3Config,
    DeepseekV3ForCausalLM,
    Dots1Config,
    Dots1ForCausalLM,
    Ernie4_5_MoeConfig,
    Ernie4_5_MoeForCausalLM,
    ExaoneMoeConfig,
    ExaoneMoeForCausalLM,
    FlexOlmoConfig,
    FlexOlmoForCausalLM,
    Glm4MoeConfig,
    Glm4MoeForCausalLM,
    Glm4MoeLiteConfig,
    Glm4MoeLiteForCausalLM,
    GptOssConfig,
    GptOssForCausalLM,
    GraniteMoeConfig,
    GraniteMoeForCausalLM,
    GraniteMoeHybridConfig,
    GraniteMoeHybridForCausalLM,
    GraniteMoeSharedConfig,
    GraniteMoeSharedForCausalLM,
    HunYuanMoEV1Config,
    HunYuanMoEV1ForCausalLM,
    JambaConfig,
    JambaForCausalLM,
    JetMoeConfig,
    JetMoeForCausalLM,
    KimiLinearConfig,
    KimiLinearForCausalLM,
    Lfm2MoeConfig,
    Lfm2MoeForCausalLM,
    Llama4ForCausalLM,
    Llama4TextConfig,
    LongcatFlashConfig,
    LongcatFlashForCausalLM,
    MiMoV2FlashConfig,
    MiMoV2FlashForCausalLM,
    MiniMaxM2Config,
    MiniMaxM2ForCausalLM,
    MixtralConfig,
    MixtralForCausalLM,
    NemotronHConfig,
    NemotronHForCausalLM,
    OlmoeConfig,
    OlmoeForCausalLM,
    PhimoeConfig,
    PhimoeForCausalLM,
    Qwen2MoeConfig,
    Qwen2MoeForCausalLM,
    Qwen3_5MoeForCausalLM,
    Qwen3_5MoeTextConfig,
    Qwen3MoeConfig,
    Qwen3MoeForCausalLM,
    Qwen3NextConfig,
    Qwen3NextForCausalLM,
)

FAMILIES = ("mixtral", "qwen2_moe", "olmoe", "qwen3_moe", "switch", "granitemoe",
            "granitemoeshared", "phimoe", "ernie4_5_moe", "glm4_moe", "dots1", "gpt_oss",
            "deepseek_v2", "deepseek_v3", "flex_olmo", "hunyuan_v1_moe",
            "glm4_moe_lite", "minimax_m2", "exaone_moe", "dbrx", "afmoe", "llama4_text", "jetmoe",
            "longcat_flash", "mimo_v2_flash", "lfm2_moe", "granitemoehybrid", "qwen3_next",
            "qwen3_5_moe", "kimi_linear", "bailing_hybrid", "jamba", "nemotron_h")
ROUTER_GAIN = 2.5  # router logits std ~ ROUTER_GAIN: varied, no expert dominates
LM_HEAD_GAIN = 1.5

_CLASSES = {
    "mixtral": (MixtralConfig, MixtralForCausalLM),
    "qwen2_moe": (Qwen2MoeConfig, Qwen2MoeForCausalLM),
    "olmoe": (OlmoeConfig, OlmoeForCausalLM),
    "qwen3_moe": (Qwen3MoeConfig, Qwen3MoeForCausalLM),
    "switch": (Qwen2MoeConfig, Qwen2MoeForCausalLM),
    "granitemoe": (GraniteMoeConfig, GraniteMoeForCausalLM),
    "granitemoeshared": (GraniteMoeSharedConfig, GraniteMoeSharedForCausalLM),
    "phimoe": (PhimoeConfig, PhimoeForCausalLM),
    "ernie4_5_moe": (Ernie4_5_MoeConfig, Ernie4_5_MoeForCausalLM),
    "glm4_moe": (Glm4MoeConfig, Glm4MoeForCausalLM),
    "dots1": (Dots1Config, Dots1ForCausalLM),
    "gpt_oss": (GptOssConfig, GptOssForCausalLM),
    "deepseek_v2": (DeepseekV2Config, DeepseekV2ForCausalLM),
    "deepseek_v3": (DeepseekV3Config, DeepseekV3ForCausalLM),
    "flex_olmo": (FlexOlmoConfig, FlexOlmoForCausalLM),
    "hunyuan_v1_moe": (HunYuanMoEV1Config, HunYuanMoEV1ForCausalLM),
    "glm4_moe_lite": (Glm4MoeLiteConfig, Glm4MoeLiteForCausalLM),
    "minimax_m2": (MiniMaxM2Config, MiniMaxM2ForCausalLM),
    "exaone_moe": (ExaoneMoeConfig, ExaoneMoeForCausalLM),
    "dbrx": (DbrxConfig, DbrxForCausalLM),
    "afmoe": (AfmoeConfig, AfmoeForCausalLM),
    "llama4_text": (Llama4TextConfig, Llama4ForCausalLM),
    "jetmoe": (JetMoeConfig, JetMoeForCausalLM),
    "longcat_flash": (LongcatFlashConfig, LongcatFlashForCausalLM),
    "mimo_v2_flash": (MiMoV2FlashConfig, MiMoV2FlashForCausalLM),
    "lfm2_moe": (Lfm2MoeConfig, Lfm2MoeForCausalLM),
    "granitemoehybrid": (GraniteMoeHybridConfig, GraniteMoeHybridForCausalLM),
    "qwen3_next": (Qwen3NextConfig, Qwen3NextForCausalLM),
    "qwen3_5_moe": (Qwen3_5MoeTextConfig, Qwen3_5MoeForCausalLM),
    "kimi_linear": (KimiLinearConfig, KimiLinearForCausalLM),
    "bailing_hybrid": (BailingHybridConfig, BailingHybridForCausalLM),
    "jamba": (JambaConfig, JambaForCausalLM),
    "nemotron_h": (NemotronHConfig, NemotronHForCausalLM),
}

# Granite's four multipliers, none of them 1 (the real models': 12, 0.22, 1/64, 8).
GRANITE_SCALES = dict(embedding_multiplier=3.0, residual_multiplier=0.5, attention_multiplier=0.2,
                      logits_scaling=1.5)

DEFAULT_CONFIGS: dict[str, dict[str, Any]] = {
    "mixtral": dict(vocab_size=97, hidden_size=36, intermediate_size=20, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, head_dim=10,
                    num_local_experts=5, num_experts_per_tok=3, max_position_embeddings=128,
                    rms_norm_eps=1e-5, rope_parameters={"rope_type": "default", "rope_theta": 1e6}),
    "qwen2_moe": dict(vocab_size=101, hidden_size=36, intermediate_size=28,
                      moe_intermediate_size=12, shared_expert_intermediate_size=20,
                      num_hidden_layers=3, num_attention_heads=6, num_key_value_heads=2,
                      num_experts=4, num_experts_per_tok=2, norm_topk_prob=False,
                      mlp_only_layers=[1], qkv_bias=True, max_position_embeddings=96,
                      rms_norm_eps=1e-6),
    # OLMo-2's norms after each sublayer; grouped-query attention, renormalised top-k.
    "flex_olmo": dict(vocab_size=101, hidden_size=40, intermediate_size=16, num_hidden_layers=3,
                      num_attention_heads=4, num_key_value_heads=2, num_experts=5,
                      num_experts_per_tok=2, norm_topk_prob=True, attention_bias=False,
                      max_position_embeddings=64, rms_norm_eps=1e-6, eos_token_id=2,
                      pad_token_id=1, tie_word_embeddings=False,
                      rope_parameters={"rope_type": "default", "rope_theta": 5e5}),
    # q/k norms per head after RoPE, head_dim 10 != 40 / 4, an ungated shared MLP,
    # top-2 of 5 renormalised, q/k/v/o biases.
    "hunyuan_v1_moe": dict(vocab_size=97, hidden_size=40, intermediate_size=12,
                           num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                           head_dim=10, num_experts=5, moe_topk=2, attention_bias=True,
                           max_position_embeddings=64, rms_norm_eps=1e-5,
                           tie_word_embeddings=False,
                           rope_parameters={"rope_type": "default", "rope_theta": 1e4}),
    "olmoe": dict(vocab_size=97, hidden_size=44, intermediate_size=16, num_hidden_layers=2,
                  num_attention_heads=2, num_key_value_heads=1, num_experts=6,
                  num_experts_per_tok=2, norm_topk_prob=False, attention_bias=True,
                  max_position_embeddings=64, rms_norm_eps=1e-5, eos_token_id=2, pad_token_id=1),
    "qwen3_moe": dict(vocab_size=101, hidden_size=44, intermediate_size=24,
                      moe_intermediate_size=14, num_hidden_layers=3, num_attention_heads=4,
                      num_key_value_heads=2, head_dim=10, num_experts=4, num_experts_per_tok=2,
                      norm_topk_prob=True, decoder_sparse_step=2, max_position_embeddings=80,
                      rms_norm_eps=1e-6),
    "switch": dict(vocab_size=97, hidden_size=36, intermediate_size=24, moe_intermediate_size=16,
                   shared_expert_intermediate_size=12, num_hidden_layers=2,
                   num_attention_heads=6, num_key_value_heads=3, num_experts=4,
                   num_experts_per_tok=1, norm_topk_prob=False, qkv_bias=True,
                   max_position_embeddings=64, rms_norm_eps=1e-6),
    "granitemoe": dict(vocab_size=97, hidden_size=40, intermediate_size=24, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, num_local_experts=5,
                       num_experts_per_tok=3, max_position_embeddings=64, rms_norm_eps=1e-6,
                       tie_word_embeddings=True, **GRANITE_SCALES),
    "granitemoeshared": dict(vocab_size=101, hidden_size=36, intermediate_size=20,
                             shared_intermediate_size=16, num_hidden_layers=2,
                             num_attention_heads=6, num_key_value_heads=2, num_local_experts=4,
                             num_experts_per_tok=2, max_position_embeddings=64,
                             rms_norm_eps=1e-6, tie_word_embeddings=False, **GRANITE_SCALES),
    # Every bias on, LayerNorm eps and sparsemixer epsilon not the defaults (1e-5, 0.01):
    # with 0.15 a second logit within 30 % of the top one joins its softmax.
    "phimoe": dict(vocab_size=97, hidden_size=40, intermediate_size=20, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2, num_local_experts=5,
                   num_experts_per_tok=2, max_position_embeddings=64, rms_norm_eps=1e-4,
                   router_jitter_noise=0.15, attention_bias=True, lm_head_bias=True,
                   tie_word_embeddings=False,
                   rope_parameters={"rope_type": "default", "rope_theta": 1e4}),
    # MoE layers: (layer + 1) % 2 == 0, from 2 to 5: layers 3 and 5 of 8 (each bound
    # binds); 2 shared experts; a floor of 0.8 on the top-3 weights' sum, which the
    # sum of 3 softmax values of 6 is often below; tied embeddings.
    "ernie4_5_moe": dict(vocab_size=101, hidden_size=40, intermediate_size=28,
                         moe_intermediate_size=12, num_hidden_layers=8,
                         num_attention_heads=4, num_key_value_heads=2, moe_num_experts=6,
                         moe_k=3, moe_num_shared_experts=2, moe_layer_start_index=2,
                         moe_layer_end_index=5, moe_layer_interval=2, moe_norm_min=0.8,
                         max_position_embeddings=64, rms_norm_eps=1e-5,
                         tie_word_embeddings=True,
                         rope_parameters={"rope_type": "default", "rope_theta": 1e4}),
    # DeepSeek-V3's router: 4 groups of 2, 2 kept (top_k 3), a dense first layer,
    # routed scaling; GLM's half-head RoPE, q/k norm and q/k/v biases.
    "glm4_moe": dict(vocab_size=97, hidden_size=40, intermediate_size=36,
                     moe_intermediate_size=12, num_hidden_layers=3, num_attention_heads=4,
                     num_key_value_heads=2, head_dim=12, n_routed_experts=8,
                     num_experts_per_tok=3, n_shared_experts=1, n_group=4, topk_group=2,
                     first_k_dense_replace=1, norm_topk_prob=True, routed_scaling_factor=2.5,
                     use_qk_norm=True, attention_bias=True, max_position_embeddings=128,
                     rms_norm_eps=1e-5, rope_parameters={"rope_type": "default",
                                                         "rope_theta": 1e4,
                                                         "partial_rotary_factor": 0.5}),
    "dots1": dict(vocab_size=101, hidden_size=36, intermediate_size=28, moe_intermediate_size=10,
                  num_hidden_layers=3, num_attention_heads=6, num_key_value_heads=2, head_dim=8,
                  n_routed_experts=6, num_experts_per_tok=2, n_shared_experts=2, n_group=3,
                  topk_group=2, first_k_dense_replace=1, norm_topk_prob=False,
                  routed_scaling_factor=1.5, attention_bias=True, max_position_embeddings=96,
                  rms_norm_eps=1e-6),
    # Sliding, full, sliding layers with a window of 8 (shorter than the 40-token test
    # prompt and than 5 + 16 greedy tokens); a SwiGLU limit of 1.5 and alpha 1.2 (not
    # 7 and 1.702) so that the clamp acts on these weights; sinks and every bias on.
    "gpt_oss": dict(vocab_size=97, hidden_size=40, intermediate_size=16, num_hidden_layers=3,
                    num_attention_heads=4, num_key_value_heads=2, head_dim=10,
                    num_local_experts=5, num_experts_per_tok=2, sliding_window=8,
                    layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                    swiglu_limit=1.5, swiglu_alpha=1.2, attention_bias=True,
                    max_position_embeddings=64, rms_norm_eps=1e-5, tie_word_embeddings=False,
                    rope_parameters={"rope_type": "default", "rope_theta": 1e4}),
    # MLA without a q LoRA (v_head_dim 10 != 8 + 4), interleaved RoPE under YaRN with an
    # original context of 16 and mscale_all_dim (the attention scale); a dense first
    # layer; group-limited greedy routing: 3 groups of 2, 2 kept, no renormalisation.
    "deepseek_v2": dict(vocab_size=97, hidden_size=40, intermediate_size=36,
                        moe_intermediate_size=12, num_hidden_layers=3, num_attention_heads=4,
                        q_lora_rank=None, kv_lora_rank=16, qk_nope_head_dim=8,
                        qk_rope_head_dim=4, v_head_dim=10, n_routed_experts=6,
                        num_experts_per_tok=3, n_shared_experts=1,
                        topk_method="group_limited_greedy", n_group=3, topk_group=2,
                        first_k_dense_replace=1, routed_scaling_factor=1.5,
                        max_position_embeddings=64, rms_norm_eps=1e-6,
                        rope_parameters={"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0,
                                         "original_max_position_embeddings": 16,
                                         "mscale": 0.9, "mscale_all_dim": 0.8,
                                         "beta_fast": 32, "beta_slow": 1}),
    # q, k and v clamped to +-1.2 (about one value in four is), LayerNorms without
    # biases, 6 experts top-2 renormalised, GQA.
    "dbrx": dict(vocab_size=101, d_model=40, n_heads=4, n_layers=2, max_seq_len=64,
                 attn_config={"kv_n_heads": 2, "clip_qkv": 1.2, "rope_theta": 1e4},
                 ffn_config={"ffn_hidden_size": 12, "moe_num_experts": 6, "moe_top_k": 2,
                             "moe_normalize_expert_weights": 1.0},
                 rope_parameters={"rope_type": "default", "rope_theta": 1e4}),
    # RMSNorm before and after each sublayer, the gated attention output, sliding
    # layers (window 8) with RoPE and every second a full one without; a dense first
    # layer, the sigmoid router with its expert_bias, top-2, route_scale 2; muP.
    "afmoe": dict(vocab_size=101, hidden_size=40, intermediate_size=28, moe_intermediate_size=10,
                  num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=10,
                  num_experts=6, num_experts_per_tok=2, num_shared_experts=1, num_dense_layers=1,
                  route_scale=2.0, sliding_window=8, global_attn_every_n_layers=2,
                  max_position_embeddings=64, mup_enabled=True, rms_norm_eps=1e-5,
                  rope_parameters={"rope_type": "default", "rope_theta": 1e4}),
    # Chunks of 8 positions with RoPE on layers 0 and 2, full attention without RoPE
    # on 1 and 3 with the temperature (floor 4: it grows over the 40-token prompts);
    # the unweighted q/k norm; MoE on layers 1 and 3 (4 experts top-1, sigmoid weights
    # on the input, a shared expert), dense 0 and 2.
    "llama4_text": dict(vocab_size=101, hidden_size=40, intermediate_size=12,
                        intermediate_size_mlp=28, num_hidden_layers=4, num_attention_heads=4,
                        num_key_value_heads=2, head_dim=10, num_local_experts=4,
                        num_experts_per_tok=1, interleave_moe_layer_step=2,
                        attention_chunk_size=8, no_rope_layer_interval=2, floor_scale=4,
                        attn_scale=0.5, max_position_embeddings=64, rms_norm_eps=1e-5,
                        rope_parameters={"rope_type": "default", "rope_theta": 1e4}),
    # A mixture of attention heads: 5 attention experts, top-2, each bringing 2 query
    # heads over the 2 shared KV heads (4 heads); the MoE's 5 experts top-2 by Granite's
    # router; biases after both sums; tied embeddings as JetMoE's default.
    "jetmoe": dict(vocab_size=101, hidden_size=40, num_hidden_layers=3, num_key_value_heads=2,
                   kv_channels=10, intermediate_size=12, num_local_experts=5,
                   num_experts_per_tok=2, max_position_embeddings=64, tie_word_embeddings=True,
                   rope_parameters={"rope_type": "default", "rope_theta": 1e4}),
    # Two decoder layers of two image layers each (a shortcut layer, then a dense one);
    # MLA with a q LoRA and interleaved RoPE (head_dim = qk_rope_head_dim), its LoRA
    # scales; 6 experts and 3 zero-computation ones, top-3 of the biased softmax, not
    # renormalised, routed scaling 6 (the default).
    "longcat_flash": dict(vocab_size=101, hidden_size=40, num_layers=2, num_attention_heads=4,
                          ffn_hidden_size=24, expert_ffn_hidden_size=10, q_lora_rank=12,
                          kv_lora_rank=14, qk_nope_head_dim=6, qk_rope_head_dim=4, head_dim=4,
                          v_head_dim=8, n_routed_experts=6, zero_expert_num=3, moe_topk=3,
                          routed_scaling_factor=6.0, max_position_embeddings=64,
                          rms_norm_eps=1e-5,
                          rope_parameters={"rope_type": "default", "rope_theta": 1e4}),
    # Full, sliding, sliding, full layers (window 8): the sliding ones with twice the KV
    # heads (2 for 4 query heads), sinks and their own RoPE base; RoPE over int(16 *
    # 0.334) = 5 dimensions (3 pairs, frequencies over 5); values 10 wide of head_dim
    # 16, scaled by 0.707; a dense first layer, the sigmoid router in 2 groups of 3
    # (1 kept), top-2, renormalised, scaling 1.5; q/k/v biases.
    "mimo_v2_flash": dict(vocab_size=101, hidden_size=40, intermediate_size=24,
                          moe_intermediate_size=10, num_hidden_layers=4, num_attention_heads=4,
                          num_key_value_heads=1, head_dim=16, v_head_dim=10,
                          n_routed_experts=6, num_experts_per_tok=2, n_group=2, topk_group=1,
                          norm_topk_prob=True, routed_scaling_factor=1.5, sliding_window=8,
                          attention_bias=True, max_position_embeddings=64, rms_norm_eps=1e-5,
                          layer_types=["full_attention", "sliding_attention",
                                       "sliding_attention", "full_attention"],
                          rope_parameters={
                              "full_attention": {"rope_type": "default", "rope_theta": 5e4,
                                                 "partial_rotary_factor": 0.334},
                              "sliding_attention": {"rope_type": "default", "rope_theta": 1e3,
                                                    "partial_rotary_factor": 0.334}}),
    # Short convolution layers (3 taps) and full attention layers (GQA, q/k norms per
    # head) in LFM2's order, conv first; a dense first layer, then the sigmoid router
    # with its expert_bias, top-2 of 6, renormalised (+ 1e-6), routed scaling 1.5; an
    # LM head of its own (tied, the default, the logits are as sharp as JetMoE's).
    "lfm2_moe": dict(vocab_size=101, hidden_size=40, intermediate_size=24,
                     moe_intermediate_size=10, num_hidden_layers=5, num_attention_heads=4,
                     num_key_value_heads=2, num_dense_layers=1, num_experts=6,
                     num_experts_per_tok=2, use_expert_bias=True, norm_topk_prob=True,
                     routed_scaling_factor=1.5, conv_L_cache=3, max_position_embeddings=64,
                     norm_eps=1e-5, tie_word_embeddings=False,
                     layer_types=["conv", "full_attention", "conv", "conv", "full_attention"],
                     rope_parameters={"rope_type": "default", "rope_theta": 1e4}),
    # Mamba2 layers (4 heads of 16 in 2 groups, a state of 8 per channel, 4 taps, the
    # chunked scan of transformers in chunks of 8) and attention layers without RoPE,
    # Granite-4.0-H's order; top-2 of 4 experts plus the shared MLP; Granite's scales.
    "granitemoehybrid": dict(vocab_size=101, hidden_size=32, intermediate_size=20,
                             shared_intermediate_size=16, num_hidden_layers=5,
                             num_attention_heads=4, num_key_value_heads=2, num_local_experts=4,
                             num_experts_per_tok=2, mamba_n_heads=4, mamba_d_head=16,
                             mamba_d_state=8, mamba_n_groups=2, mamba_d_conv=4,
                             mamba_chunk_size=8, max_position_embeddings=64, rms_norm_eps=1e-6,
                             tie_word_embeddings=False, position_embedding_type=None,
                             layer_types=["linear_attention", "full_attention",
                                          "linear_attention", "linear_attention",
                                          "full_attention"], **GRANITE_SCALES),
    # Gated delta layers (2 key heads of 8, 4 value heads of 6, 4 taps) and gated
    # attention layers (per-head q/k norms, RoPE on a quarter of the head); a dense
    # layer among the MoE ones (softmax top-2 of 4 renormalised, the gated shared expert).
    "qwen3_next": dict(vocab_size=101, hidden_size=32, intermediate_size=24,
                       moe_intermediate_size=12, shared_expert_intermediate_size=16,
                       num_hidden_layers=5, num_attention_heads=4, num_key_value_heads=2,
                       head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
                       linear_key_head_dim=8, linear_value_head_dim=6, linear_conv_kernel_dim=4,
                       num_experts=4, num_experts_per_tok=2, mlp_only_layers=[1],
                       max_position_embeddings=64, rms_norm_eps=1e-6, tie_word_embeddings=False,
                       layer_types=["linear_attention", "linear_attention", "full_attention",
                                    "linear_attention", "full_attention"],
                       rope_parameters={"rope_type": "default", "rope_theta": 1e4,
                                        "partial_rotary_factor": 0.25}),
    # Qwen3.5-MoE's text model: the same layers (the gated delta projections apart, one
    # key head for 4 value heads of 8 wide keys 6), every layer MoE; default partial RoPE.
    "qwen3_5_moe": dict(vocab_size=101, hidden_size=32, moe_intermediate_size=12,
                        shared_expert_intermediate_size=16, num_hidden_layers=4,
                        num_attention_heads=4, num_key_value_heads=1, head_dim=16,
                        linear_num_key_heads=1, linear_num_value_heads=4, linear_key_head_dim=6,
                        linear_value_head_dim=8, linear_conv_kernel_dim=4, num_experts=5,
                        num_experts_per_tok=2, max_position_embeddings=64, rms_norm_eps=1e-6,
                        tie_word_embeddings=False,
                        layer_types=["linear_attention", "full_attention", "linear_attention",
                                     "full_attention"]),
    # KDA layers (4 heads of 8, 4 taps, gates of rank 8) and MLA layers without RoPE
    # (kv rank 12, its 4-wide key part never turned); a dense first layer, then the
    # sigmoid router with its bias (one group, as Kimi-Linear's), top-2, a shared expert.
    "kimi_linear": dict(vocab_size=101, hidden_size=32, intermediate_size=24,
                        moe_intermediate_size=10, num_hidden_layers=4, num_attention_heads=4,
                        num_key_value_heads=4, kv_lora_rank=12, q_lora_rank=None,
                        qk_rope_head_dim=4, qk_nope_head_dim=6, v_head_dim=8, num_local_experts=6,
                        num_experts_per_tok=2, n_shared_experts=1, n_group=1, topk_group=1,
                        linear_head_dim=8, linear_num_heads=4, linear_conv_kernel_dim=4,
                        max_position_embeddings=64, rms_norm_eps=1e-5, pad_token_id=0,
                        bos_token_id=1, eos_token_id=2, tie_word_embeddings=False,
                        layer_types=["linear_attention", "full_attention", "linear_attention",
                                     "full_attention"],
                        mlp_layer_types=["dense", "sparse", "sparse", "sparse"]),
    # Ling's hybrid: KDA layers with one-matrix gates and the bounded forget gate (-5),
    # MLA with interleaved RoPE and a sigmoid gate per head, in groups of 2 (KDA, MLA);
    # a dense first layer, then the sigmoid router with its bias in 2 groups of 4.
    "bailing_hybrid": dict(vocab_size=101, hidden_size=32, intermediate_size=24,
                           moe_intermediate_size=10, num_hidden_layers=4, num_attention_heads=4,
                           num_key_value_heads=4, kv_lora_rank=12, q_lora_rank=None,
                           qk_rope_head_dim=4, qk_nope_head_dim=6, v_head_dim=8, head_dim=8,
                           num_local_experts=8, num_experts_per_tok=2, n_shared_experts=1,
                           n_group=2, topk_group=1, first_k_dense_replace=1, layer_group_size=2,
                           max_position_embeddings=64, rms_norm_eps=1e-6, pad_token_id=0,
                           eos_token_id=2, tie_word_embeddings=False),
    # Jamba: Mamba (v1) layers (64 channels, a state of 8, dt rank 4, 4 taps, the norms
    # of dt, B and C) and an attention layer without RoPE at 2 of 4; MoE on every other
    # layer (softmax top-2 of 4, not renormalised), SwiGLU MLPs between.
    "jamba": dict(vocab_size=101, hidden_size=32, intermediate_size=24, num_hidden_layers=4,
                  num_attention_heads=4, num_key_value_heads=2, num_experts=4,
                  num_experts_per_tok=2, expert_layer_period=2, expert_layer_offset=1,
                  attn_layer_period=4, attn_layer_offset=2, mamba_d_state=8, mamba_d_conv=4,
                  mamba_expand=2, mamba_dt_rank=4, max_position_embeddings=64,
                  rms_norm_eps=1e-6, tie_word_embeddings=False),
    # Nemotron-H's blocks, one each: Mamba2 (4 heads of 16 in 2 groups, a state of 8),
    # MoE (relu^2 experts without gates, the sigmoid router with its bias, top-2 of 6,
    # a shared expert), attention without RoPE, a relu^2 MLP, Mamba2, MoE.
    "nemotron_h": dict(vocab_size=101, hidden_size=32, intermediate_size=24,
                       layers_block_type=["linear_attention", "moe", "full_attention", "mlp",
                                          "linear_attention", "moe"],
                       num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                       mamba_num_heads=4, mamba_head_dim=16, ssm_state_size=8, n_groups=2,
                       conv_kernel=4, chunk_size=8, n_routed_experts=6, num_experts_per_tok=2,
                       moe_intermediate_size=10, moe_shared_expert_intermediate_size=12,
                       routed_scaling_factor=1.5, max_position_embeddings=64,
                       layer_norm_epsilon=1e-5, tie_word_embeddings=False),
    # MLA with a q LoRA and interleaved RoPE, DeepSeek-V3's sigmoid router with 4
    # groups of 2 (2 kept, top-3), renormalised, routed scaling 2.5; a dense first layer.
    "deepseek_v3": dict(vocab_size=101, hidden_size=36, intermediate_size=28,
                        moe_intermediate_size=10, num_hidden_layers=3, num_attention_heads=4,
                        num_key_value_heads=4, q_lora_rank=12, kv_lora_rank=14,
                        qk_nope_head_dim=6, qk_rope_head_dim=4, v_head_dim=8,
                        n_routed_experts=8, num_experts_per_tok=3, n_shared_experts=1,
                        n_group=4, topk_group=2, first_k_dense_replace=1, norm_topk_prob=True,
                        routed_scaling_factor=2.5, rope_interleave=True,
                        max_position_embeddings=96, rms_norm_eps=1e-5,
                        rope_parameters={"rope_type": "default", "rope_theta": 1e4}),
    # Sliding layers with RoPE (window 8 < the 40-token prompts) and every third a
    # global one without; a dense first layer; the sigmoid router with 2 groups of 3
    # (1 kept), top-2, scaling 2.5; a shared expert; per-head q/k norm.
    "exaone_moe": dict(vocab_size=101, hidden_size=40, intermediate_size=28,
                       moe_intermediate_size=10, num_hidden_layers=4, num_attention_heads=4,
                       num_key_value_heads=2, head_dim=10, num_experts=6,
                       num_experts_per_tok=2, num_shared_experts=1, n_group=2, topk_group=1,
                       routed_scaling_factor=2.5, norm_topk_prob=True, first_k_dense_replace=1,
                       sliding_window=8, sliding_window_pattern=3, max_position_embeddings=64,
                       rms_norm_eps=1e-5, bos_token_id=1, eos_token_id=2, pad_token_id=0,
                       tie_word_embeddings=False,
                       rope_parameters={"rope_type": "default", "rope_theta": 1e4}),
    # q/k norms over the whole projections, RoPE on 6 of 10 dimensions, the sigmoid
    # router with a selection bias (set by _rescale), 6 experts top-3.
    "minimax_m2": dict(vocab_size=97, hidden_size=40, intermediate_size=12, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=10,
                       num_local_experts=6, num_experts_per_tok=3, max_position_embeddings=64,
                       rms_norm_eps=1e-6, bos_token_id=1, eos_token_id=2,
                       tie_word_embeddings=False,
                       rope_parameters={"rope_type": "default", "rope_theta": 5e6,
                                        "partial_rotary_factor": 0.6}),
    # DeepSeek-V3's MLA and router in GLM's layout: sparse, dense, sparse layers by
    # mlp_layer_types; 3 groups of 2 (2 kept, top-2), routed scaling 1.8.
    "glm4_moe_lite": dict(vocab_size=97, hidden_size=40, intermediate_size=24,
                          moe_intermediate_size=10, num_hidden_layers=3, num_attention_heads=4,
                          num_key_value_heads=4, q_lora_rank=10, kv_lora_rank=12,
                          qk_nope_head_dim=6, qk_rope_head_dim=4, v_head_dim=10,
                          n_routed_experts=6, num_experts_per_tok=2, n_shared_experts=1,
                          n_group=3, topk_group=2, norm_topk_prob=True,
                          routed_scaling_factor=1.8, rope_interleave=True,
                          mlp_layer_types=["sparse", "dense", "sparse"],
                          max_position_embeddings=64, rms_norm_eps=1e-5,
                          rope_parameters={"rope_type": "default", "rope_theta": 1e4}),
}

# Named variants of the default configs: (family, overrides). The YaRN ones have an
# original context of 16, shorter than the 40-token test prompts; gpt-oss's with its
# checkpoints' truncate false.
GLM_YARN = {"rope_type": "yarn", "rope_theta": 1e4, "partial_rotary_factor": 0.5, "factor": 4.0,
            "original_max_position_embeddings": 16}
V3_YARN = {"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0,
           "original_max_position_embeddings": 16, "mscale": 1.0, "mscale_all_dim": 0.7,
           "beta_fast": 16, "beta_slow": 2}
GPT_OSS_YARN = {"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0, "beta_fast": 32.0,
                "beta_slow": 1.0, "truncate": False, "original_max_position_embeddings": 16}
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "qwen2_moe_norm": ("qwen2_moe", {"norm_topk_prob": True}),
    "glm4_moe_yarn": ("glm4_moe", {"rope_parameters": GLM_YARN, "max_position_embeddings": 64}),
    "gpt_oss_yarn": ("gpt_oss", {"rope_parameters": GPT_OSS_YARN}),
    # Mixtral's and PhiMoE's sliding_window, on every layer, shorter than the prompts.
    "mixtral_window": ("mixtral", {"sliding_window": 8}),
    "phimoe_window": ("phimoe", {"sliding_window": 8}),
    # DeepSeek-V2 with a q LoRA, its greedy router (no groups) and default RoPE.
    "deepseek_v2_greedy": ("deepseek_v2", {"q_lora_rank": 10, "topk_method": "greedy",
                                           "n_group": None, "topk_group": None,
                                           "rope_parameters": {"rope_type": "default",
                                                               "rope_theta": 1e4}}),
    # DeepSeek-V3 without a q LoRA, RoPE as halves, YaRN with mscale != mscale_all_dim.
    "deepseek_v3_yarn": ("deepseek_v3", {"q_lora_rank": None, "rope_interleave": False,
                                         "max_position_embeddings": 64,
                                         "rope_parameters": V3_YARN}),
    # Hunyuan's NTK alpha as its checkpoints write it ("dynamic" with a factor of 1 and
    # an alpha: a fixed, stretched base), moe_topk as a per-layer list of one value.
    "hunyuan_v1_moe_alpha": ("hunyuan_v1_moe", {"rope_parameters": {
        "rope_type": "dynamic", "alpha": 1000.0, "factor": 1.0, "rope_theta": 1e4},
        "moe_topk": [2, 2]}),
    # MiniMax-M2's rotary_dim as its checkpoints write it (4 of 10 dimensions).
    # AFMoE without shared experts (transformers keeps an MLP of width 0).
    "afmoe_unshared": ("afmoe", {"num_shared_experts": 0}),
    # DBRX's released clamp (8: never reached here), no renormalisation, top-1, MQA.
    # (transformers 5.24 cannot run clip_qkv null: torch.clamp gets two Nones.)
    "dbrx_plain": ("dbrx", {"attn_config": {"kv_n_heads": 1, "clip_qkv": 8.0, "rope_theta": 1e4},
                            "ffn_config": {"ffn_hidden_size": 12, "moe_num_experts": 4,
                                           "moe_top_k": 1, "moe_normalize_expert_weights": None}}),
    # Llama 4 with MoE on every layer, top-2, no chunks, no q/k norm, no temperature.
    "llama4_text_plain": ("llama4_text", {"num_experts_per_tok": 2, "interleave_moe_layer_step": 1,
                                          "attention_chunk_size": None, "use_qk_norm": False,
                                          "attn_temperature_tuning": False}),
    "minimax_m2_rotary": ("minimax_m2", {"rotary_dim": 4, "rope_parameters": {
        "rope_type": "default", "rope_theta": 5e6}}),
    # Granite-4.0-H's attention with RoPE, after two Mamba2 layers with one group, 3
    # taps, no conv bias. (transformers 5.24 cannot run a model without attention
    # layers with a cache: its position ids come from an attention layer's length.)
    "granitemoehybrid_rope": ("granitemoehybrid", {
        "position_embedding_type": "rope", "mamba_n_groups": 1, "mamba_d_conv": 3,
        "mamba_conv_bias": False, "rope_parameters": {"rope_type": "default", "rope_theta": 1e4},
        "num_hidden_layers": 3,
        "layer_types": ["linear_attention", "linear_attention", "full_attention"]}),
}

TOKENIZER_TEXT = (
    "the small bird sings in the morning and the big bird answers from the tree . "
    "experts route tokens ; the router picks the best expert for every token . "
    "a tiny model runs on a tiny chip with a tiny memory and a fast flash ."
)


def _normal(shape: tuple[int, ...], std: float, gen: torch.Generator) -> torch.Tensor:
    return torch.randn(shape, generator=gen, dtype=torch.float32) * std


def _init_value(name: str, p: torch.Tensor, hidden: int, gen: torch.Generator) -> torch.Tensor:
    shape = tuple(p.shape)
    if 0 in shape:  # an MLP of width 0 (AFMoE without shared experts)
        return p.detach().clone()
    if name.endswith(("embed_tokens.weight", "wte.weight")):
        return _normal(shape, 1.0, gen)
    if name.endswith("self_attn.sinks"):
        return _normal(shape, 1.0, gen)
    if name.endswith((".bias", "e_score_correction_bias", "expert_bias")):
        return _normal(shape, 0.1, gen)
    if "norm" in name.rsplit(".", 2)[-2]:
        return 1.0 + _normal(shape, 0.2, gen)
    if name.endswith(("mlp.gate.weight", "moe.router.weight", "mlp.router.weight",
                      "mlp.gate.wg.weight", "ffn.router.layer.weight", "router.gate.weight",
                      "feed_forward.router.weight", "router.layer.weight",
                      "router.classifier.weight", "feed_forward.gate.weight")):
        return _normal(shape, ROUTER_GAIN / math.sqrt(hidden), gen)
    if name.endswith("lm_head.weight"):
        return _normal(shape, LM_HEAD_GAIN / math.sqrt(hidden), gen)
    return _normal(shape, 1.0 / math.sqrt(shape[-1]), gen)  # [.., out, in]: N(0, 1/in)


def _rescale(model: torch.nn.Module, family: str, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed + 1)
    hidden = model.config.hidden_size
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(_init_value(name, p, hidden, gen))
            if family in ("gpt_oss", "llama4_text") and name.endswith(("experts.gate_up_proj",
                                                                      "experts.down_proj")):
                p.copy_(_normal(tuple(p.shape), 1.0 / math.sqrt(p.shape[-2]), gen))  # [E, in, out]
            if family == "gpt_oss" and name.endswith("_proj_bias"):
                p.copy_(_normal(tuple(p.shape), 0.1, gen))
            if family == "dbrx" and name.endswith("experts.mlp.w2"):  # [E F, H], used as h @ w2
                width = model.config.ffn_config.ffn_hidden_size
                p.copy_(_normal(tuple(p.shape), 1.0 / math.sqrt(width), gen))
            if family == "switch" and name.endswith("shared_expert.down_proj.weight"):
                p.zero_()
            if family in ("qwen3_next", "qwen3_5_moe") and "norm" in name and \
                    "linear_attn" not in name:
                p.sub_(1.0)  # zero-centred norms: 1 + weight scales, as trained ones do ~1
        for name, b in model.named_buffers():  # DeepSeek-V3's (LFM2's) selection bias
            if name.endswith("e_score_correction_bias") or (
                    family == "lfm2_moe" and name.endswith("expert_bias")):
                b.copy_(_normal(tuple(b.shape), 0.3, gen))


def build_model(family: str, seed: int = 0, **config_overrides: Any) -> tuple[torch.nn.Module, Any]:
    """A tiny eval-mode float32 model of `family` with rescaled random weights."""
    config_cls, model_cls = _CLASSES[family]
    config = config_cls(**(DEFAULT_CONFIGS[family] | config_overrides))
    torch.manual_seed(seed)
    model = model_cls(config).to(torch.float32).eval()
    # Plain loops: the grouped-mm experts kernel wants 16-byte strides our odd sizes lack.
    model.config._experts_implementation = "eager"
    model.config._attn_implementation = "eager"
    _rescale(model, family, seed)
    return model, config


def build_tokenizer(vocab_size: int) -> Any:
    """A real BPE tokenizer trained in-process, with at most vocab_size tokens."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=min(vocab_size, 80), show_progress=False,
                                  special_tokens=["<unk>", "<s>", "</s>"])
    tok.train_from_iterator([TOKENIZER_TEXT] * 4, trainer)
    assert tok.get_vocab_size() <= vocab_size
    return tok


def _tensors(model: torch.nn.Module, layout: str) -> dict[str, torch.Tensor]:
    if layout == "per_expert":
        with tempfile.TemporaryDirectory() as tmp:
            model.save_pretrained(tmp)
            return load_file(str(Path(tmp) / "model.safetensors"))
    if layout == "fused":
        tensors = {k: v.detach().clone() for k, v in model.state_dict().items()}
        if model.config.tie_word_embeddings:
            tensors.pop("lm_head.weight", None)
        return tensors
    raise ValueError(f"layout {layout!r}: per_expert or fused")


def _write_shards(tensors: dict[str, torch.Tensor], out_dir: Path, shards: int) -> None:
    names = list(tensors)
    if shards == 1:
        save_file(tensors, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
        return
    weight_map = {}
    for i in range(shards):
        shard = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[i::shards]}
        save_file(part, str(out_dir / shard), metadata={"format": "pt"})
        weight_map |= {n: shard for n in part}
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    (out_dir / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))


def save_checkpoint(model: torch.nn.Module, out_dir: str | Path, *, layout: str = "per_expert",
                    shards: int = 1, dtype: str = "float32", tokenizer: bool = True,
                    weights_format: str = "safetensors") -> Path:
    """Write config.json, the weights and (optionally) tokenizer.json to out_dir.

    layout: "per_expert" (as save_pretrained writes) or "fused" (in-memory names).
    shards: number of .safetensors files (an index is written when > 1).
    dtype: "float32" or "bfloat16". weights_format: "safetensors" or "torch"
    (a single pytorch_model.bin).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.config.save_pretrained(out_dir)
    torch_dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype]
    tensors = {k: v.to(torch_dtype).contiguous() for k, v in _tensors(model, layout).items()}
    if weights_format == "torch":
        torch.save(tensors, out_dir / "pytorch_model.bin")
    else:
        _write_shards(tensors, out_dir, shards)
    if tokenizer:
        build_tokenizer(model.config.vocab_size).save(str(out_dir / "tokenizer.json"))
    return out_dir


def edit_config(hf_dir: str | Path, **changes: Any) -> None:
    """Change (or, with value ...Ellipsis, delete) fields of hf_dir/config.json."""
    path = Path(hf_dir) / "config.json"
    config = json.loads(path.read_text())
    for key, value in changes.items():
        if value is Ellipsis:
            config.pop(key, None)
        else:
            config[key] = value
    path.write_text(json.dumps(config, indent=2))
