"""The model image format (docs/format.md): its constants and layout, the reader and the
writer, quantized weights, sizes, status codes and signatures."""
