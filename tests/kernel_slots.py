"""The core's calls through its kernel table, for the static stack bounds of
the bare-metal ports: which reference kernels a slot call may reach (read
from the table's definition in sdk/src/kernels/reference.c, the one source),
and which core functions make such calls (a new one must be added here, so a
stack bound never silently skips a path)."""
from __future__ import annotations

import re
from pathlib import Path

REFERENCE = Path(__file__).resolve().parents[1] / "sdk" / "src" / "kernels" / "reference.c"

# Core functions that call kernel slots (after inlining, any of them may be
# the caller the call graph shows).
KERNEL_CALLERS = frozenset({
    "colibri_forward", "token_forward", "decoder_layer", "colibri_attention_forward", "project",
    "qk_normalise", "rope_heads", "attend_head", "colibri_ffn_forward", "swiglu_mlp",
    "routed_experts", "shared_expert", "colibri_router_route",
})


def reference_kernels() -> list[str]:
    """The functions colibri_kernels_reference points at."""
    table = REFERENCE.read_text().split("colibri_kernels_reference =", 1)[1]
    names = re.findall(r"\.\w+ = (colibri_k_\w+),", table)
    assert names, f"no kernel table in {REFERENCE}"
    return names
