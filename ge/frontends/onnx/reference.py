"""onnxruntime as a reference: what ``ge run --check`` compares GE's outputs with."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from ge.frontends.onnx.parser import ModelSource, load_model

__all__ = ["run_onnxruntime", "onnx_op_histogram"]


def run_onnxruntime(model: ModelSource, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The model's outputs by onnxruntime's CPU provider, keyed by output name."""
    import onnxruntime

    proto = load_model(model)
    session = onnxruntime.InferenceSession(proto.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    names = [output.name for output in session.get_outputs()]
    results: list[Any] = session.run(names, feeds)
    return dict(zip(names, (np.asarray(r) for r in results)))


def onnx_op_histogram(model: ModelSource) -> Counter[str]:
    """How many nodes of each op type the model's main graph has."""
    proto = load_model(model)
    return Counter((f"{n.domain}::" if n.domain not in ("", "ai.onnx") else "") + n.op_type
                   for n in proto.graph.node)
