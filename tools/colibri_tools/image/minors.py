"""The minor format version each feature needs (docs/format.md 7);
image_spec re-exports them."""

from __future__ import annotations

MINOR_QUANT = 3                 # version_minor of an image with a Q8/Q4 tensor
MINOR_ROW_GROUPS = 8            # version_minor of an image with a Q8_R16/Q4_R16 tensor
MINOR_EXPERTS_LAST = 9          # version_minor of an image with FLAG_EXPERTS_LAST
MINOR_POST_NORMS = 10           # version_minor with norm_kind 2, qk_norm 3, arch 15 .. 19, attn_kind 2
MINOR_LLAMA4_ERA = 11           # qkv_clip, the gate bit, norm_kind 3, arch 20 .. 22 and more
MINOR_ZERO_EXPERTS = 12         # zero_experts, ffn_kind 2 (shortcut), arch 24
MINOR_CONV = 13                 # the record's extension, attn_kind 4 (short convolution), arch 26
MINOR_MAMBA2 = 14               # the extension's ssm_* fields, attn_kind 5 .. 9, ffn_kind 3, arch 27 .. 33
MINOR_SUPERBLOCKS = 15          # version_minor of an image with a QK2 .. QK6 tensor
MINOR_QK_ROW_GROUPS = 16        # version_minor of an image with a QK2_R16 .. QK6_R16 tensor
