"""Colibri host tools: convert Hugging Face MoE checkpoints to Colibri model images
(docs/format.md) and read them back.

    from colibri_tools import convert, read_image
    result = convert("hf_model_dir", "out_dir")
    image = read_image(result.image_path, verify_data=True)
"""

from .converter.convert import ConvertResult, convert
from .errors import CheckpointError, ColibriError, ImageFormatError, OptionError, UnsupportedModelError
from .image.image_reader import ModelImage, fix_meta_crc, read_image
from .image.sizes import scratch_size, state_size
from .version import VERSION as __version__  # noqa: E402

__all__ = [
    "ConvertResult", "convert", "CheckpointError", "ColibriError", "ImageFormatError",
    "OptionError", "UnsupportedModelError", "ModelImage", "fix_meta_crc", "read_image",
    "scratch_size", "state_size", "__version__",
]
