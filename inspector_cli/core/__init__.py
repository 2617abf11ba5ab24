"""Graph core: loading, selection, exposure, capture, inputs and the onnxruntime runner."""
