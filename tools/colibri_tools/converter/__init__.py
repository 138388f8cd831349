"""Hugging Face checkpoints to model images: colibri-convert, the checkpoint readers, the
model families and the C headers (model_config.h, colibri-vocab)."""
