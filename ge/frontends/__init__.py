"""Frontends: foreign model formats translated into registry ops.

Each frontend lives in its own module and imports its framework lazily, so
``import ge`` never needs ONNX, PyTorch or TensorFlow.
"""
