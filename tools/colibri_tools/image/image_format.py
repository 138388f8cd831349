"""The model image format (docs/format.md): the public entry point.

Constants and field tables live in image_spec, the canonical tensor order and
placement in image_layout, the streaming writer in image_writer and the
validating reader in image_reader; this module gathers what other code needs:

    from colibri_tools.image.image_format import read_image, write_image, fix_meta_crc, Role
"""

from __future__ import annotations

from .image_layout import (
    ExpertBlock,
    Problem,
    align_up,
    expert_blocks,
    layer_kind_problems,
    model_problems,
    place_tensors,
    record_problems,
)
from .image_reader import ModelImage, fix_meta_crc, read_image
from .image_spec import (
    DATA_ALIGN,
    DEFAULT_ALIGNMENT,
    DTYPE_F32,
    EXPERT_ROLES,
    HEADER_FIELDS,
    HEADER_SIZE,
    LAYER_ENTRY_SIZE,
    LAYER_FIELDS,
    MAGIC,
    MAX_ALIGNMENT,
    MAX_TOP_K,
    META_CRC_OFFSET,
    MIN_ALIGNMENT,
    MODEL_RECORD_END,
    MODEL_RECORD_FIELDS,
    NO_EXPERT,
    NO_LAYER,
    TENSOR_ENTRY_SIZE,
    TENSOR_FIELDS,
    VERSION_MAJOR,
    VERSION_MINOR,
    Arch,
    FfnKind,
    LayerEntry,
    ModelRecord,
    Role,
    TensorEntry,
    meta_crc32,
    tables_end,
)
from .image_writer import SourceTensor, WrittenImage, write_image
from .layer_shapes import canonical_tensors, layer_tensor_count

__all__ = [
    "ExpertBlock", "Problem", "align_up", "canonical_tensors", "expert_blocks", "place_tensors",
    "record_problems", "layer_kind_problems", "layer_tensor_count", "model_problems",
    "ModelImage", "read_image", "fix_meta_crc", "DATA_ALIGN",
    "DEFAULT_ALIGNMENT", "DTYPE_F32", "EXPERT_ROLES", "HEADER_FIELDS", "HEADER_SIZE",
    "LAYER_ENTRY_SIZE", "LAYER_FIELDS", "MAGIC", "MAX_ALIGNMENT", "MAX_TOP_K",
    "META_CRC_OFFSET", "MIN_ALIGNMENT", "MODEL_RECORD_END", "MODEL_RECORD_FIELDS", "NO_EXPERT",
    "NO_LAYER", "TENSOR_ENTRY_SIZE", "TENSOR_FIELDS", "VERSION_MAJOR", "VERSION_MINOR", "Arch",
    "FfnKind", "LayerEntry", "ModelRecord", "Role", "TensorEntry", "meta_crc32", "tables_end",
    "SourceTensor", "WrittenImage", "write_image",
]
