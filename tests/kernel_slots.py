"""The core's calls through its kernel table, for the static stack bounds of
the bare-metal ports: which kernels a slot call may reach (read from the
definitions of the tables a firmware has, in the first of each table's files
in sdk/src/kernels/tables.mk: the one source; a slot a SIMD table leaves NULL
is the reference's),
and which core functions make such calls (a new one must be added here, so a
stack bound never silently skips a path)."""
from __future__ import annotations

import re
from pathlib import Path

from colibri_tools.board import boards

# Core functions that call kernel slots (after inlining, any of them may be
# the caller the call graph shows).
KERNEL_CALLERS = frozenset({
    "colibri_forward", "chunk_forward", "decoder_layer", "norm_rows", "add_rows",
    "colibri_attention_forward", "project", "qk_normalise", "rope_heads", "attend_head",
    "keys_of_token", "colibri_ffn_forward", "swiglu_mlp", "swiglu_mlps", "add_part_biases",
    "activate_rows", "sum_group", "routed_experts", "shared_expert", "project_qkv",
    "colibri_router_select", "softmax_biased", "add_bias", "colibri_linear", "group_end",
    "group_parts", "prefetch_expert", "colibri_linear_group", "run_parallel", "product_rows",
    "group_task", "colibri_parallel_tasks", "head_task", "colibri_mla_forward", "queries",
    "latent_of_token", "latent_head", "mla_head_task", "route_tokens", "expert_block",
    "release_experts", "experts_chosen", "sublayer_input", "add_sublayer", "qk_normalise_token",
    "gate_output", "colibri_expert_queries", "colibri_expert_outputs", "zero_experts",
    "moe_forward", "dense_ffn", "colibri_mamba2_forward", "scan_head", "gated_norm",
    "colibri_ssm_scan", "colibri_gated_delta_forward", "delta_head", "normed_gate",
    "colibri_kda_forward", "colibri_mamba1_forward", "scan_channel", "time_steps", "gate_heads",
    "colibri_ssm_inputs", "operator_sublayer", "gate_projection", "decay_row", "channel_decays",
    "key_score", "add_value",
})


def kernel_sources(table: str) -> list[Path]:
    """A table's files (tables.mk, read by the board loader), the one defining
    colibri_kernels_<table> first."""
    found = boards.kernel_sources()
    assert table in found, f"no kernel table '{table}' in sdk/src/kernels/tables.mk"
    return found[table]


def kernel_functions(tables: tuple[str, ...] = ()) -> list[str]:
    """The functions the reference table and the named tables point at."""
    names: list[str] = []
    for table in ("reference", *tables):
        source = kernel_sources(table)[0].read_text()
        body = source.split(f"colibri_kernels_{table} =", 1)[1]
        found = re.findall(r"\.\w+ = (\w+),", body)
        assert found, f"no kernel table in {kernel_sources(table)[0]}"
        names += [n for n in found if n not in names]
    return names
