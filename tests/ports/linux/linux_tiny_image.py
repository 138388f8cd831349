"""A small random-weight Colibri image for the Linux port tests.

Built with the image writer of colibri_tools (no torch needed): a Mixtral-like
model with 2 layers of 4 experts, top-2 routing, vocab 64. The weights are
random but fixed (seeded), so runs are reproducible.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from colibri_tools.image.image_spec import Arch, FfnKind, ModelRecord, Role
from colibri_tools.image.image_writer import SourceTensor, write_image
from colibri_tools.image.layer_shapes import canonical_tensors

VOCAB = 64
MAX_CONTEXT = 32

_NORM_ROLES = {Role.OUTPUT_NORM, Role.ATTN_NORM, Role.FFN_NORM}


def tiny_record() -> ModelRecord:
    return ModelRecord(vocab_size=VOCAB, hidden_size=32, n_layers=2, n_heads=4, n_kv_heads=2,
                       head_dim=8, max_context=MAX_CONTEXT, dense_intermediate=0,
                       expert_intermediate=16, n_experts=4, shared_intermediate=0,
                       rms_eps=1e-5, rope_theta=10000.0, top_k=2, router_norm_topk=1)


def write_tiny_image(path: str | Path, seed: int = 1234, alignment: int = 4096,
                     record: ModelRecord | None = None, dense: bool = False) -> Path:
    """Write the tiny image (or one for `record`, all layers MoE, or with
    dense all dense) to `path`."""
    record = tiny_record() if record is None else record
    kinds = [int(FfnKind.DENSE if dense else FfnKind.MOE)] * record.n_layers
    entries, _ = canonical_tensors(record, kinds)
    rng = np.random.default_rng(seed)
    arrays = []
    for entry in entries:
        if entry.role in _NORM_ROLES:
            arrays.append(np.ones(entry.shape, dtype=np.float32))
        else:
            arrays.append((rng.standard_normal(entry.shape) * 0.5).astype(np.float32))
    sources = [SourceTensor(e, (lambda a=a: a)) for e, a in zip(entries, arrays)]
    write_image(path, arch=int(Arch.MIXTRAL), record=record, ffn_kinds=kinds, sources=sources,
                alignment=alignment)
    return Path(path)
