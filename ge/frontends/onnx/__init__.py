"""The ONNX frontend: ``parse_onnx`` (ONNX -> GE) and ``export_onnx`` (GE -> ONNX)."""

from ge.frontends.onnx.exporter import export_onnx
from ge.frontends.onnx.parser import load_model, parse_onnx

__all__ = ["export_onnx", "load_model", "parse_onnx"]
