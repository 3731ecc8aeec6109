"""ONNX's recurrent layers need no translator.

``RNN``, ``GRU`` and ``LSTM`` (opset 7 and newer) are registry ops with ONNX's
inputs, attributes and outputs (``ge/ops/rnn.py``), so they map directly. Models
of older opsets, whose recurrent ops carried ``output_sequence``, are brought to
opset 7 by the parser first.
"""
