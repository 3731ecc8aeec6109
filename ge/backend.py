"""GE as an ONNX backend, usable as ``onnxruntime.backend`` is.

    import ge.backend
    rep = ge.backend.prepare("model.onnx")        # or bytes, or an onnx.ModelProto
    outputs = rep.run([input_array, ...])          # outputs in the model's order

``onnx.backend.test.BackendTest(ge.backend, __name__)`` runs ONNX's own
conformance suite through it.

Every failure is a ``ge.errors`` type: a device GE does not run on is a
``GERuntimeError``, a model that is not a path, bytes or ``onnx.ModelProto`` (or not a
readable one) a ``ModelFormatError``, inputs that do not fit the model an ``InputError``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep, Device, DeviceType

from ge.compiler import compile
from ge.errors import GERuntimeError, InputError, ModelFormatError
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
        """Run once. ``inputs`` is a list in input order, a dict by name, or one array;
        ``InputError`` when they do not fit the model's inputs."""
        results = self.session.run(self._feed(inputs))
        return tuple(results[name] for name in self.output_names)

    def _feed(self, inputs: Any) -> dict[str, Any]:
        if isinstance(inputs, Mapping):
            return dict(inputs)
        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Iterable):
            raise InputError(f"inputs must be a list of arrays in input order, a dict by name "
                             f"or one array; got {type(inputs).__name__}")
        inputs = list(inputs)
        if len(inputs) > len(self.input_names):
            raise InputError(f"got {len(inputs)} inputs; the model takes "
                             f"{len(self.input_names)}: {', '.join(self.input_names)}")
        return dict(zip(self.input_names, inputs))


class GEBackend(Backend):
    """The ONNX backend interface over ``parse_onnx``, ``ge.compile`` and ``ge.Session``."""

    @classmethod
    def supports_device(cls, device: str) -> bool:
        """GE runs on the CPU (``"CPU"`` or ``"CPU:<id>"``, any case); False for any other
        device, and for anything that does not name one."""
        if not isinstance(device, str):
            return False
        try:
            parsed = Device(device.upper())
        except (AttributeError, ValueError, IndexError):  # onnx's parse of an unknown name
            return False
        return parsed.type == DeviceType.CPU

    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", **kwargs: Any) -> GEBackendRep:
        """Parse and compile ``model`` (path, bytes or ModelProto); ``GERuntimeError`` for a
        device GE does not run on, ``ModelFormatError`` for something that is not a model."""
        if not cls.supports_device(device):
            raise GERuntimeError(f"GE's ONNX backend runs on the CPU, not on device {device!r}")
        if not isinstance(model, (str, bytes, os.PathLike, onnx.ModelProto)):
            raise ModelFormatError(f"an ONNX model is a path, bytes or an onnx.ModelProto, "
                                   f"not {type(model).__name__}")
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

        if not isinstance(node, onnx.NodeProto):
            raise ModelFormatError(f"run_node takes an onnx.NodeProto, not {type(node).__name__}")
        if not cls.supports_device(device):
            raise GERuntimeError(f"GE's ONNX backend runs on the CPU, not on device {device!r}")

        graph_inputs = []
        for name, array in zip(node.input, inputs):
            if not name:
                continue
            array = np.asarray(array)
            try:
                code = helper.np_dtype_to_tensor_dtype(array.dtype)
            except (KeyError, ValueError, TypeError) as error:  # onnx's lookup, translated
                raise InputError(f"input {name!r} of dtype {array.dtype} has no ONNX element "
                                 f"type ({error})") from None
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
