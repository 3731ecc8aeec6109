"""Placeholder: ONNX translators of one op family."""
