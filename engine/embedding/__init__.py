"""The embedding model: model cards read from disk, the ONNX and torch runtimes, export, cache and devices."""
