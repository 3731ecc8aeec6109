"""GE as an ONNX backend, usable as ``onnxruntime.backend`` is.

    import ge.backend
    rep = ge.backend.prepare("model.onnx")        # or bytes, or an onnx.ModelProto
    outputs = rep.run([input_array, ...])          # outputs in the model's order

``onnx.backend.test.BackendTest(ge.backend, __name__)`` runs ONNX's own
conformance suite through it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep, Device, DeviceType

from ge.compiler import compile
from ge.frontends.onnx import parse_onnx
from ge.session import Session

__all__ = ["GEBackend", "GEBackendRep", "prepare", "run_model", "run_node", "supports_device"]


class GEBackendRep(BackendRep):
    """A prepared model: call ``run`` with the inputs, get the outputs in order."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.input_names = [name for name, _ in session.get_inputs()]
        self.output_names = [name for name, _ in session.get_outputs()]

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        """Run once. ``inputs`` is a list in input order, a dict by name, or one array."""
        if isinstance(inputs, Mapping):
            feed = dict(inputs)
        else:
            if isinstance(inputs, np.ndarray):
                inputs = [inputs]
            feed = dict(zip(self.input_names, inputs))
        results = self.session.run(feed)
        return tuple(results[name] for name in self.output_names)


class GEBackend(Backend):
    """The ONNX backend interface over ``parse_onnx``, ``ge.compile`` and ``ge.Session``."""

    @classmethod
    def supports_device(cls, device: str) -> bool:
        """GE runs on the CPU."""
        return Device(device).type == DeviceType.CPU

    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", **kwargs: Any) -> GEBackendRep:
        """Parse and compile ``model`` (path, bytes or ModelProto)."""
        if not cls.supports_device(device):
            raise RuntimeError(f"GE's ONNX backend does not run on device {device!r}")
        return GEBackendRep(Session(compile(parse_onnx(model))))

    @classmethod
    def run_model(cls, model: Any, inputs: Any, device: str = "CPU",
                  **kwargs: Any) -> tuple[np.ndarray, ...]:
        """Prepare and run once."""
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs: Sequence[np.ndarray], device: str = "CPU",
                 outputs_info: Optional[Sequence[tuple[Any, Any]]] = None,
                 **kwargs: Any) -> tuple[np.ndarray, ...]:
        """Run one ONNX node on ``inputs``, by wrapping it in a model."""
        from onnx import helper

        graph_inputs = []
        for name, array in zip(node.input, inputs):
            if not name:
                continue
            array = np.asarray(array)
            code = helper.np_dtype_to_tensor_dtype(array.dtype)
            graph_inputs.append(helper.make_tensor_value_info(name, code, array.shape))
        graph_outputs = [helper.make_empty_tensor_value_info(name) for name in node.output if name]
        opset = kwargs.get("opset_version", onnx.defs.onnx_opset_version())
        model = helper.make_model(
            helper.make_graph([node], "run_node", graph_inputs, graph_outputs),
            opset_imports=[helper.make_opsetid(node.domain or "", opset)])
        feeds = [np.asarray(a) for name, a in zip(node.input, inputs) if name]
        return cls.run_model(model, feeds, device)


prepare = GEBackend.prepare
run_model = GEBackend.run_model
run_node = GEBackend.run_node
supports_device = GEBackend.supports_device
