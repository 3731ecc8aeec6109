"""Where the weights lie inside a serialized ONNX model, so they are read without copies.

Reading ``TensorProto.raw_data`` through protobuf's Python API makes a fresh copy of
every weight (a ResNet-50 is 100 MB; a large language model, gigabytes). The
serialized model, which the parser holds anyway, already contains those bytes:
``raw_data_views`` walks the protobuf wire format (varint keys, length-delimited
fields) down ``ModelProto.graph`` (field 7) -> ``GraphProto.initializer`` (field 5)
-> ``TensorProto.name`` (8) and ``raw_data`` (9), and returns a memoryview of each
initializer's bytes by name. Anything it does not understand ends the walk: the
parser then reads that tensor the usual way.
"""

from __future__ import annotations

from collections.abc import Iterator

__all__ = ["raw_data_views"]

_MODEL_GRAPH, _GRAPH_INITIALIZER, _TENSOR_NAME, _TENSOR_RAW_DATA = 7, 5, 8, 9
_VARINT, _FIXED64, _LENGTH_DELIMITED, _FIXED32 = 0, 1, 2, 5


class _Malformed(Exception):
    """The bytes are not the protobuf the walk expected."""


def _varint(data: memoryview, position: int) -> tuple[int, int]:
    result, shift = 0, 0
    while True:
        if position >= len(data) or shift > 63:
            raise _Malformed
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, position
        shift += 7


def _fields(data: memoryview, start: int, end: int) -> Iterator[tuple[int, int, int]]:
    """(field number, start, end) of each length-delimited field in ``data[start:end]``."""
    position = start
    while position < end:
        key, position = _varint(data, position)
        wire_type = key & 7
        if wire_type == _VARINT:
            _, position = _varint(data, position)
        elif wire_type == _FIXED64:
            position += 8
        elif wire_type == _FIXED32:
            position += 4
        elif wire_type == _LENGTH_DELIMITED:
            length, position = _varint(data, position)
            if position + length > end:
                raise _Malformed
            yield key >> 3, position, position + length
            position += length
        else:
            raise _Malformed
    if position != end:
        raise _Malformed


def raw_data_views(model: bytes) -> dict[str, memoryview]:
    """Initializer name -> its ``raw_data`` bytes inside ``model`` (the main graph's only;
    empty when the bytes are not a model this walk understands)."""
    data = memoryview(model)
    views: dict[str, memoryview] = {}
    try:
        for field, start, end in _fields(data, 0, len(data)):
            if field != _MODEL_GRAPH:
                continue
            for inner, tensor_start, tensor_end in _fields(data, start, end):
                if inner != _GRAPH_INITIALIZER:
                    continue
                name, raw = None, None
                for part, part_start, part_end in _fields(data, tensor_start, tensor_end):
                    if part == _TENSOR_NAME:
                        name = bytes(data[part_start:part_end]).decode("utf-8", "replace")
                    elif part == _TENSOR_RAW_DATA:
                        raw = data[part_start:part_end]
                if name is not None and raw is not None:
                    views[name] = raw
    except _Malformed:
        return {}
    return views
