"""Measuring: colibri-bench (and its llama.cpp peer), colibri-quant-report and colibri-plot."""
