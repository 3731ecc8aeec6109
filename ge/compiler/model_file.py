"""The offline model file: a compiled executable saved once, loaded without recompiling.

Layout (all integers little-endian)::

    b"GEMODEL\\0"                      magic, 8 bytes
    u32 version, u32 flags (0)
    u64 metadata length, u64 tensor-data length
    metadata: UTF-8 JSON            the optimized graph (constants by reference), the
                                    steps with their engines, inputs, outputs, constant
                                    slots, the compile report and options
    zero padding to a 64-byte boundary
    tensor data                     raw little-endian bytes, each tensor 64-byte aligned
    sha256 of everything above, 32 bytes

Loading checks the magic, the version (a file from a newer GE is refused), every
length and the checksum before it reads the JSON, and takes constants as read-only
views of the file's bytes. Nothing is unpickled or evaluated; whatever is wrong raises
``ModelFormatError`` saying what. A step whose engine cannot run here (the torch
engine without PyTorch) runs on the NumPy engine, and the report says so. Kernels are
looked up by op type and engine when a
``Session`` loads the executable, as for a freshly compiled one.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path
from typing import Any, Union

from ge.compiler.executable import Executable, IOSpec, Step
from ge.engines import get_engine
from ge.errors import GEError, ModelFormatError
from ge.ir import DataType, TensorDesc
from ge.ir.serialize import TensorStore, graph_from_dict, graph_to_dict

__all__ = ["save", "load", "MAGIC", "VERSION"]

MAGIC = b"GEMODEL\0"
VERSION = 2  # 2: streams, their events and the memory plan
_HEADER = struct.Struct("<8sIIQQ")
_DIGEST = 32
_ALIGNMENT = TensorStore.ALIGNMENT

PathLike = Union[str, os.PathLike]


def save(executable: Executable, path: PathLike) -> None:
    """Write ``executable`` to ``path`` as an offline model file."""
    if not isinstance(executable, Executable):
        raise ModelFormatError(f"ge.save expects an Executable (ge.compile's result), "
                               f"got {type(executable).__name__}")
    store = TensorStore()
    metadata = {
        "graph": graph_to_dict(executable.graph, store),
        "source": None if executable.source is None else graph_to_dict(executable.source, store),
        "steps": [[s.node, s.op_type, s.engine, list(s.inputs), list(s.outputs), list(s.release)]
                  for s in executable.steps],
        "inputs": [_spec_to_data(spec) for spec in executable.inputs],
        "outputs": [_spec_to_data(spec) for spec in executable.outputs],
        "constants": [[slot, name] for slot, name in executable.constants.items()],
        "num_slots": executable.num_slots,
        "report": executable.report,
        "options": executable.options,
        "streams": list(executable.streams),
        "stream_waits": [list(w) for w in executable.stream_waits],
        "memory_options": executable.memory_options,
        "static_memory_plan": _static_plan(executable),
    }
    text = json.dumps(metadata, separators=(",", ":"), allow_nan=True).encode("utf-8")
    head = _HEADER.pack(MAGIC, VERSION, 0, len(text), store.size)
    padding = bytes(-(len(head) + len(text)) % _ALIGNMENT)
    digest = hashlib.sha256()
    target = Path(path)
    with open(target, "wb") as file:
        for chunk in (head, text, padding, *store.chunks()):
            digest.update(chunk)
            file.write(chunk)
        file.write(digest.digest())


def load(path: PathLike) -> Executable:
    """Read an offline model file written by ``save``; ``ModelFormatError`` if it is not one
    this GE reads (not a GE model, truncated, changed since it was written, or newer)."""
    target = Path(path)
    try:
        data = target.read_bytes()
    except OSError as error:
        raise ModelFormatError(f"{target}: cannot read the model file ({error})") from error
    if len(data) < _HEADER.size + _DIGEST or not data.startswith(MAGIC):
        raise ModelFormatError(f"{target}: not a GE model file (no {MAGIC[:7].decode()} header)")
    _, version, _, text_length, tensor_length = _HEADER.unpack_from(data)
    if version > VERSION:
        raise ModelFormatError(f"{target}: model file version {version} is newer than this GE "
                               f"reads (up to {VERSION}); recompile the model or update GE")
    start = _HEADER.size + text_length
    tensors_at = start + (-start % _ALIGNMENT)
    if version < 1 or len(data) != tensors_at + tensor_length + _DIGEST:
        raise ModelFormatError(f"{target}: the file has {len(data)} bytes, its header says "
                               f"{tensors_at + tensor_length + _DIGEST} (truncated?)")
    body = memoryview(data)[:-_DIGEST]
    if hashlib.sha256(body).digest() != data[-_DIGEST:]:
        raise ModelFormatError(f"{target}: checksum mismatch (the file was changed or damaged)")
    try:
        metadata = json.loads(bytes(body[_HEADER.size:start]).decode("utf-8"))
        store = TensorStore(body[tensors_at:])
        return _executable(metadata, store)
    except ModelFormatError as error:
        raise ModelFormatError(f"{target}: {error}") from error
    except (GEError, KeyError, TypeError, ValueError, IndexError) as error:
        raise ModelFormatError(f"{target}: malformed model metadata ({type(error).__name__}: "
                               f"{error})") from error


def _static_plan(executable: Executable) -> Any:
    """The memory plan for the graph's own input shapes, when they are all known: its
    offsets and figures, for a reader of the file (a session plans again when it runs)."""
    if not all(spec.desc.is_static for spec in executable.inputs):
        return None
    from ge.compiler.loader import static_plan

    _, bound = static_plan(executable)
    return {**bound.memory.report(),
            "offsets": [[slot, offset] for slot, offset in sorted(bound.memory.offsets.items())],
            "inplace_steps": sorted(bound.memory.inplace),
            "view_steps": sorted(bound.memory.views)}


def _runnable(engine: str, report: dict[str, Any]) -> str:
    """``engine``, or ``numpy`` when that engine cannot run here (its library is
    missing), which the report then says."""
    try:
        reason = get_engine(engine).unavailable_reason()
    except GEError:
        raise ModelFormatError(f"the model names an engine GE does not know: {engine!r}") \
            from None
    if reason is None:
        return engine
    report.setdefault("engines_unavailable", {})[engine] = f"{reason}; its steps run on numpy"
    return "numpy"


def _executable(metadata: dict[str, Any], store: TensorStore) -> Executable:
    source = metadata["source"]
    report = dict(metadata["report"])
    return Executable(
        graph=graph_from_dict(metadata["graph"], store),
        steps=[Step(str(node), str(op_type), _runnable(str(engine), report),
                    tuple(map(int, inputs)), tuple(map(int, outputs)), tuple(map(int, release)))
               for node, op_type, engine, inputs, outputs, release in metadata["steps"]],
        inputs=[_spec_from_data(entry) for entry in metadata["inputs"]],
        outputs=[_spec_from_data(entry) for entry in metadata["outputs"]],
        constants={int(slot): str(name) for slot, name in metadata["constants"]},
        num_slots=int(metadata["num_slots"]),
        report=report,
        options=dict(metadata["options"]),
        streams=tuple(int(k) for k in metadata.get("streams", ())),  # absent in version 1
        stream_waits=tuple(tuple(int(j) for j in w) for w in metadata.get("stream_waits", ())),
        memory_options={str(k): bool(v) for k, v in metadata.get("memory_options", {}).items()},
        source=None if source is None else graph_from_dict(source, store),
    )


def _spec_to_data(spec: IOSpec) -> dict[str, Any]:
    return {"name": spec.name, "shape": list(spec.desc.shape), "dtype": spec.desc.dtype.name,
            "format": spec.desc.format.value, "slot": spec.slot}


def _spec_from_data(entry: dict[str, Any]) -> IOSpec:
    desc = TensorDesc(entry["shape"], DataType.parse(entry["dtype"]), entry["format"])
    return IOSpec(str(entry["name"]), desc, int(entry["slot"]))
