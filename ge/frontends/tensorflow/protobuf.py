"""GE's own reader of TensorFlow's ``GraphDef``: the protobuf wire format, without TensorFlow.

A serialized protobuf message is a run of fields, each a varint key (``field number << 3 |
wire type``) and a payload: a varint (wire type 0), 8 little-endian bytes (1), a varint
length and that many bytes (2), or 4 little-endian bytes (5). Repeated numbers may come
one field each or *packed*, several in one length-delimited field. This module decodes
the messages a frozen graph uses, with the field numbers of TensorFlow's
``tensorflow/core/framework/*.proto``:

- ``GraphDef``: ``node`` = 1 (the rest, ``library`` and ``versions``, is skipped)
- ``NodeDef``: ``name`` = 1, ``op`` = 2, ``input`` = 3, ``device`` = 4, ``attr`` = 5
  (a ``map<string, AttrValue>``: entries with ``key`` = 1, ``value`` = 2)
- ``AttrValue``: ``list`` = 1, ``s`` = 2, ``i`` = 3, ``f`` = 4, ``b`` = 5, ``type`` = 6,
  ``shape`` = 7, ``tensor`` = 8, ``placeholder`` = 9, ``func`` = 10; its ``ListValue``:
  ``s`` = 2, ``i`` = 3, ``f`` = 4, ``b`` = 5, ``type`` = 6, ``shape`` = 7, ``tensor`` = 8
- ``TensorProto``: ``dtype`` = 1, ``tensor_shape`` = 2, ``tensor_content`` = 4,
  ``float_val`` = 5, ``double_val`` = 6, ``int_val`` = 7, ``int64_val`` = 10,
  ``bool_val`` = 11, ``half_val`` = 13, ``uint32_val`` = 16, ``uint64_val`` = 17
  (``string_val`` = 8 is not read: GE has no string dtype, and refuses ``DT_STRING``)
- ``TensorShapeProto``: ``dim`` = 2 (``size`` = 1, ``name`` = 2), ``unknown_rank`` = 3

Nodes are decoded when the graph is read; a node's attributes only when asked for, so
the weights of nodes a model does not use are never converted. Anything malformed
raises ``ModelFormatError`` saying where; nothing here raises ``IndexError`` or
``struct.error``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Optional, Union

import numpy as np

from ge.errors import ModelFormatError, UnsupportedOpError
from ge.ir import DataType

__all__ = ["GraphDef", "NodeDef", "NameAttrList", "decode_graph_def", "decode_tensor",
           "decode_shape", "TF_DTYPE_NAMES", "to_ge_dtype"]

VARINT, FIXED64, LENGTH_DELIMITED, FIXED32 = 0, 1, 2, 5
_WIRE_NAMES = {VARINT: "a varint", FIXED64: "8 fixed bytes", LENGTH_DELIMITED: "bytes",
               FIXED32: "4 fixed bytes"}

#: TensorFlow's ``DataType`` enum numbers and names (``types.proto``)
TF_DTYPE_NAMES = {
    1: "DT_FLOAT", 2: "DT_DOUBLE", 3: "DT_INT32", 4: "DT_UINT8", 5: "DT_INT16", 6: "DT_INT8",
    7: "DT_STRING", 8: "DT_COMPLEX64", 9: "DT_INT64", 10: "DT_BOOL", 11: "DT_QINT8",
    12: "DT_QUINT8", 13: "DT_QINT32", 14: "DT_BFLOAT16", 15: "DT_QINT16", 16: "DT_QUINT16",
    17: "DT_UINT16", 18: "DT_COMPLEX128", 19: "DT_HALF", 20: "DT_RESOURCE", 21: "DT_VARIANT",
    22: "DT_UINT32", 23: "DT_UINT64",
}

# TensorFlow dtype number -> GE dtype (the ``_REF`` variants, number + 100, read alike)
_GE_DTYPES = {
    1: DataType.DT_FLOAT, 2: DataType.DT_DOUBLE, 3: DataType.DT_INT32, 4: DataType.DT_UINT8,
    5: DataType.DT_INT16, 6: DataType.DT_INT8, 9: DataType.DT_INT64, 10: DataType.DT_BOOL,
    14: DataType.DT_BF16, 17: DataType.DT_UINT16, 19: DataType.DT_FLOAT16,
    22: DataType.DT_UINT32, 23: DataType.DT_UINT64,
}

_TWO_TO_64 = 1 << 64
_MAX_FILLED = 1 << 31  # elements a constant written as a few values may expand to
_TWO_TO_63 = 1 << 63


def to_ge_dtype(code: int, where: str) -> DataType:
    """The GE dtype of TensorFlow dtype number ``code``; ``UnsupportedOpError`` for one GE
    has no counterpart of (strings, complex numbers, quantized types, resources)."""
    found = _GE_DTYPES.get(code % 100 if code > 100 else code)
    if found is None:
        label = TF_DTYPE_NAMES.get(code % 100 if code > 100 else code, f"dtype number {code}")
        raise UnsupportedOpError(f"{where}: TensorFlow {label} has no GE dtype")
    return found


# -- the wire format --------------------------------------------------------------------

def _varint(data: memoryview, position: int, end: int) -> tuple[int, int]:
    result, shift = 0, 0
    while True:
        if position >= end:
            raise ModelFormatError(f"truncated protobuf: a varint runs past byte {end}")
        if shift > 63:
            raise ModelFormatError(f"malformed protobuf: a varint at byte {position} is longer "
                                   f"than 10 bytes")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, position
        shift += 7


def _signed(value: int) -> int:
    """A 64-bit two's-complement varint as a Python int (``int32``/``int64`` fields)."""
    value &= _TWO_TO_64 - 1
    return value - _TWO_TO_64 if value >= _TWO_TO_63 else value


Payload = Union[int, memoryview]


def fields(data: memoryview, start: int = 0, end: Optional[int] = None
           ) -> Iterator[tuple[int, int, Payload]]:
    """``(field number, wire type, payload)`` of each field in ``data[start:end]``: the
    payload is an int for a varint, the bytes (a memoryview) for the other wire types."""
    end = len(data) if end is None else end
    position = start
    while position < end:
        key_at = position
        key, position = _varint(data, position, end)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ModelFormatError(f"malformed protobuf: field number 0 at byte {key_at}")
        if wire == VARINT:
            value, position = _varint(data, position, end)
            yield number, wire, value
            continue
        if wire == LENGTH_DELIMITED:
            length, position = _varint(data, position, end)
        elif wire in (FIXED64, FIXED32):
            length = 8 if wire == FIXED64 else 4
        else:
            raise ModelFormatError(f"malformed protobuf: wire type {wire} (field {number}) at "
                                   f"byte {key_at}")
        if position + length > end:
            raise ModelFormatError(f"truncated protobuf: field {number} at byte {key_at} needs "
                                   f"{length} bytes, {end - position} are left")
        yield number, wire, data[position:position + length]
        position += length


def _expect(number: int, wire: int, wanted: int, message: str) -> None:
    if wire != wanted:
        raise ModelFormatError(f"malformed {message}: field {number} holds "
                               f"{_WIRE_NAMES.get(wire, wire)}, expected "
                               f"{_WIRE_NAMES[wanted]}")


def _text(payload: memoryview, what: str) -> str:
    try:
        return bytes(payload).decode("utf-8")
    except UnicodeDecodeError:
        raise ModelFormatError(f"malformed {what}: not UTF-8 text") from None


def _varints(wire: int, payload: Payload) -> list[int]:
    """The numbers of a repeated varint field, packed or not."""
    if wire == VARINT:
        assert isinstance(payload, int)
        return [payload]
    if wire != LENGTH_DELIMITED:
        raise ModelFormatError(f"malformed protobuf: {_WIRE_NAMES.get(wire, wire)} where "
                               f"varints were expected")
    assert isinstance(payload, memoryview)
    values, position = [], 0
    while position < len(payload):
        value, position = _varint(payload, position, len(payload))
        values.append(value)
    return values


def _fixed(wire: int, payload: Payload, code: str, size: int, what: str) -> list[Any]:
    """The numbers of a repeated fixed-width field (``code``: ``<f``, ``<d``), packed or
    not."""
    assert isinstance(payload, memoryview)
    if wire not in (LENGTH_DELIMITED, FIXED32 if size == 4 else FIXED64) or len(payload) % size:
        raise ModelFormatError(f"malformed {what}: {len(payload)} bytes of "
                               f"{_WIRE_NAMES.get(wire, wire)} for {size}-byte numbers")
    return list(struct.unpack(f"<{len(payload) // size}{code[-1]}", payload))


# -- TensorShapeProto and TensorProto ---------------------------------------------------

def decode_shape(data: memoryview) -> Optional[list[int]]:
    """A ``TensorShapeProto``: its sizes (``-1`` unknown), or None for an unknown rank."""
    dims: list[int] = []
    unknown_rank = False
    for number, wire, payload in fields(data):
        if number == 2:
            _expect(number, wire, LENGTH_DELIMITED, "TensorShapeProto")
            assert isinstance(payload, memoryview)
            size = 0  # proto3: an absent size is 0; an unknown one is written as -1
            for inner, inner_wire, value in fields(payload):
                if inner == 1:
                    _expect(inner, inner_wire, VARINT, "TensorShapeProto.Dim")
                    assert isinstance(value, int)
                    size = _signed(value)
            dims.append(size if size >= 0 else -1)
        elif number == 3:
            unknown_rank = bool(_varints(wire, payload)[-1])
    return None if unknown_rank else dims


@dataclass
class _TensorFields:
    """The fields of one ``TensorProto`` as read, before they become an array."""

    dtype: int = 0
    shape: Optional[list[int]] = field(default_factory=list)
    content: Optional[memoryview] = None
    values: list[Any] = field(default_factory=list)  # the typed *_val field's numbers


_VARINT_VALUES = {7: "int_val", 10: "int64_val", 11: "bool_val", 13: "half_val",
                  16: "uint32_val", 17: "uint64_val"}


def _tensor_fields(data: memoryview) -> _TensorFields:
    found = _TensorFields()
    for number, wire, payload in fields(data):
        if number == 1:
            _expect(number, wire, VARINT, "TensorProto")
            assert isinstance(payload, int)
            found.dtype = payload
        elif number == 2:
            _expect(number, wire, LENGTH_DELIMITED, "TensorProto")
            assert isinstance(payload, memoryview)
            found.shape = decode_shape(payload)
        elif number == 4:
            _expect(number, wire, LENGTH_DELIMITED, "TensorProto")
            assert isinstance(payload, memoryview)
            found.content = payload
        elif number == 5:
            found.values += _fixed(wire, payload, "<f", 4, "TensorProto.float_val")
        elif number == 6:
            found.values += _fixed(wire, payload, "<d", 8, "TensorProto.double_val")
        elif number in _VARINT_VALUES:
            found.values += _varints(wire, payload)
    return found


def decode_tensor(data: memoryview, where: str) -> np.ndarray:
    """A ``TensorProto`` as a read-only NumPy array of a GE dtype.

    The data is ``tensor_content`` (the raw little-endian bytes) when present, else the
    typed ``*_val`` field; fewer values than elements fill the rest with the last value,
    as TensorFlow does (one ``float_val`` broadcasts over a shaped tensor), and none
    means zeros.
    """
    found = _tensor_fields(data)
    dtype = to_ge_dtype(found.dtype, where)
    if found.shape is None:
        raise ModelFormatError(f"{where}: a constant tensor of unknown rank")
    shape = tuple(found.shape)
    if any(d < 0 for d in shape):
        raise ModelFormatError(f"{where}: a constant tensor of unknown shape {list(shape)}")
    numpy_dtype = dtype.np_dtype
    count = int(np.prod(shape, dtype=np.int64))
    if found.content is not None:
        stored = numpy_dtype.newbyteorder("<") if numpy_dtype.itemsize > 1 else numpy_dtype
        if len(found.content) != count * numpy_dtype.itemsize:
            raise ModelFormatError(f"{where}: tensor_content holds {len(found.content)} bytes; "
                                   f"{list(shape)} of {dtype.value} needs "
                                   f"{count * numpy_dtype.itemsize}")
        array = np.frombuffer(found.content, dtype=stored).astype(numpy_dtype, copy=False)
        array = array.reshape(shape)
    else:
        array = _from_values(found.values, dtype, count, where).reshape(shape)
    array.setflags(write=False)
    return array


def _from_values(values: list[Any], dtype: DataType, count: int, where: str) -> np.ndarray:
    numpy_dtype = dtype.np_dtype
    if count > _MAX_FILLED:
        raise ModelFormatError(f"{where}: {count} elements from {len(values)} value(s): more "
                               f"than a constant of a GraphDef holds")
    if len(values) > count:
        raise ModelFormatError(f"{where}: {len(values)} values for a tensor of {count} "
                               f"elements")
    if not values:
        return np.zeros(count, numpy_dtype)
    if dtype in (DataType.DT_FLOAT16, DataType.DT_BF16):  # half_val: the bits, as int32s
        bits = np.asarray(values, dtype=np.uint64).astype(np.uint16)
        array = bits.view(numpy_dtype)
    elif dtype.is_integer:
        signed = [_signed(v) for v in values] if numpy_dtype.kind == "i" else values
        array = np.asarray(signed, dtype=np.int64 if numpy_dtype.kind == "i" else np.uint64)
        array = array.astype(numpy_dtype)
    else:
        array = np.asarray(values).astype(numpy_dtype)
    if len(array) < count:
        array = np.concatenate([array, np.full(count - len(array), array[-1], numpy_dtype)])
    return np.ascontiguousarray(array)


# -- AttrValue --------------------------------------------------------------------------

@dataclass(frozen=True)
class NameAttrList:
    """A function reference (``AttrValue.func``): its name only."""

    name: str


def _list_value(data: memoryview, where: str) -> list[Any]:
    """An ``AttrValue.ListValue``: the items of whichever field it holds."""
    items: list[Any] = []
    for number, wire, payload in fields(data):
        if number == 2:
            _expect(number, wire, LENGTH_DELIMITED, f"{where} list")
            assert isinstance(payload, memoryview)
            items.append(_text(payload, where))
        elif number in (3, 6):
            items += [_signed(v) for v in _varints(wire, payload)]
        elif number == 4:
            items += _fixed(wire, payload, "<f", 4, f"{where} list")
        elif number == 5:
            items += [bool(v) for v in _varints(wire, payload)]
        elif number == 7:
            _expect(number, wire, LENGTH_DELIMITED, f"{where} list")
            assert isinstance(payload, memoryview)
            items.append(decode_shape(payload))
        elif number == 8:
            _expect(number, wire, LENGTH_DELIMITED, f"{where} list")
            assert isinstance(payload, memoryview)
            items.append(decode_tensor(payload, where))
    return items


def decode_attr_value(data: memoryview, where: str) -> Any:
    """An ``AttrValue`` as a Python value: ``s`` and ``placeholder`` a str, ``i`` and
    ``type`` an int, ``f`` a float, ``b`` a bool, ``shape`` a list of sizes (None: unknown
    rank), ``tensor`` a NumPy array, ``list`` a list, ``func`` a ``NameAttrList``."""
    value: Any = None
    for number, wire, payload in fields(data):
        if number in (1, 2, 7, 8, 9, 10):
            _expect(number, wire, LENGTH_DELIMITED, where)
            assert isinstance(payload, memoryview)
            if number == 1:
                value = _list_value(payload, where)
            elif number in (2, 9):
                value = _text(payload, where)
            elif number == 7:
                value = decode_shape(payload)
            elif number == 8:
                value = decode_tensor(payload, where)
            else:
                name = ""
                for inner, inner_wire, text in fields(payload):
                    if inner == 1 and inner_wire == LENGTH_DELIMITED:
                        assert isinstance(text, memoryview)
                        name = _text(text, where)
                value = NameAttrList(name)
        elif number in (3, 6):
            _expect(number, wire, VARINT, where)
            assert isinstance(payload, int)
            value = _signed(payload)
        elif number == 4:
            value = _fixed(wire, payload, "<f", 4, where)[0]
        elif number == 5:
            _expect(number, wire, VARINT, where)
            value = bool(payload)
    return value


# -- NodeDef and GraphDef ---------------------------------------------------------------

_MISSING = object()


@dataclass
class NodeDef:
    """One TensorFlow node: its name, op, inputs (``"name"``, ``"name:1"``, or
    ``"^name"`` for a control dependency), device, and attributes decoded on demand."""

    name: str
    op: str
    inputs: list[str]
    device: str = ""
    attr_bytes: dict[str, memoryview] = field(default_factory=dict, repr=False)
    _decoded: dict[str, Any] = field(default_factory=dict, repr=False)

    def has_attr(self, key: str) -> bool:
        """True when the node sets attribute ``key``."""
        return key in self.attr_bytes

    def attr(self, key: str, default: Any = _MISSING) -> Any:
        """Attribute ``key`` decoded (see ``decode_attr_value``); ``default`` when the node
        does not set it, ``ModelFormatError`` when there is no default."""
        if key in self._decoded:
            return self._decoded[key]
        raw = self.attr_bytes.get(key)
        if raw is None:
            if default is _MISSING:
                raise ModelFormatError(f"TensorFlow {self.op} node {self.name!r} has no "
                                       f"attribute {key!r}")
            return default
        value = decode_attr_value(raw, f"TensorFlow {self.op} node {self.name!r} attribute "
                                       f"{key!r}")
        self._decoded[key] = value
        return value


@dataclass
class GraphDef:
    """A decoded ``GraphDef``: its nodes in file order."""

    nodes: list[NodeDef]


def _map_entry(data: memoryview, where: str) -> tuple[str, memoryview]:
    key, value = "", memoryview(b"")
    for number, wire, payload in fields(data):
        _expect(number, wire, LENGTH_DELIMITED, where)
        assert isinstance(payload, memoryview)
        if number == 1:
            key = _text(payload, where)
        elif number == 2:
            value = payload
    return key, value


def _node_def(data: memoryview, index: int) -> NodeDef:
    where = f"NodeDef #{index}"
    name, op, device = "", "", ""
    inputs: list[str] = []
    attrs: dict[str, memoryview] = {}
    for number, wire, payload in fields(data):
        if number > 5:
            continue
        _expect(number, wire, LENGTH_DELIMITED, where)
        assert isinstance(payload, memoryview)
        if number == 1:
            name = _text(payload, f"{where} name")
        elif number == 2:
            op = _text(payload, f"{where} op")
        elif number == 3:
            inputs.append(_text(payload, f"{where} input"))
        elif number == 4:
            device = _text(payload, f"{where} device")
        else:
            key, value = _map_entry(payload, f"{where} attr")
            attrs[key] = value
    if not name or not op:
        raise ModelFormatError(f"{where} has no {'name' if not name else 'op'}")
    return NodeDef(name, op, inputs, device, attrs)


def decode_graph_def(data: Union[bytes, bytearray, memoryview]) -> GraphDef:
    """Decode a serialized ``GraphDef``; ``ModelFormatError`` saying why when the bytes are
    not one (another protobuf, text, truncated data)."""
    view = memoryview(data).cast("B")
    nodes: list[NodeDef] = []
    try:
        for number, wire, payload in fields(view):
            if number != 1:
                continue
            if wire != LENGTH_DELIMITED:
                raise ModelFormatError(f"field 1 holds {_WIRE_NAMES.get(wire, wire)} where a "
                                       f"GraphDef holds its nodes (an ONNX model, or a "
                                       f"SavedModel's saved_model.pb?)")
            assert isinstance(payload, memoryview)
            nodes.append(_node_def(payload, len(nodes)))
    except ModelFormatError as error:
        raise ModelFormatError(f"not a readable TensorFlow GraphDef: {error}") from None
    if not nodes:
        raise ModelFormatError("not a TensorFlow GraphDef: it holds no nodes")
    return GraphDef(nodes)
