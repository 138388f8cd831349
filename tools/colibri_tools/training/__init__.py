"""colibri-train-tiny: a small MoE trained from scratch."""
