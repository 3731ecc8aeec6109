"""Graphs to draw, and an independent PNG reader to check the pictures with."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

import numpy as np

import ge
from ge.ops import create_node

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def residual_cnn(name: str = "residual") -> ge.Graph:
    """Data -> Conv2D+BatchNorm+Relu -> Conv2D -> Add(skip) -> Relu -> MatMul+BiasAdd."""
    rng = np.random.default_rng(0)
    graph = ge.Graph(name)

    def const(label: str, shape: tuple[int, ...], low: float = -0.5, high: float = 0.5):
        value = ge.Tensor(rng.uniform(low, high, shape).astype(np.float32))
        return create_node("Const", [], {"value": value}, label, graph)

    x = create_node("Data", [], {"shape": [1, 8, 8, 4]}, "x", graph)
    conv1 = create_node("Conv2D", [x, const("w1", (3, 3, 4, 4))], {"padding": "SAME"},
                        "conv1", graph)
    bn = create_node("FusedBatchNorm", [conv1, const("scale", (4,), 0.5, 1.5),
                                        const("offset", (4,)), const("mean", (4,)),
                                        const("variance", (4,), 0.5, 1.5)], {}, "bn1", graph)
    relu1 = create_node("Relu", [bn], {}, "relu1", graph)
    conv2 = create_node("Conv2D", [relu1, const("w2", (3, 3, 4, 4))], {"padding": "SAME"},
                        "conv2", graph)
    add = create_node("Add", [conv2, x], {}, "add", graph)
    relu2 = create_node("Relu", [add], {}, "relu2", graph)
    shape = create_node("Const", [], {"value": ge.Tensor(np.array([1, 256], np.int64))},
                        "flat_shape", graph)
    flat = create_node("Reshape", [relu2, shape], {}, "flatten", graph)
    matmul = create_node("MatMul", [flat, const("w3", (256, 10))], {}, "fc", graph)
    out = create_node("BiasAdd", [matmul, const("b3", (10,))], {}, "logits", graph)
    graph.set_outputs([out])
    return graph


@dataclass
class Png:
    """A decoded 8-bit RGB or RGBA PNG: size and rows of pixel bytes."""

    width: int
    height: int
    channels: int
    rows: list[bytes]
    chunks: list[bytes]

    def colors(self, every: int = 1) -> set[bytes]:
        """The distinct pixel values of every ``every``-th row."""
        found: set[bytes] = set()
        step = self.channels
        for row in self.rows[::every]:
            found.update(row[i:i + step] for i in range(0, len(row), step))
        return found


def _paeth(left: int, up: int, corner: int) -> int:
    estimate = left + up - corner
    distances = (abs(estimate - left), abs(estimate - up), abs(estimate - corner))
    return (left, up, corner)[distances.index(min(distances))]


def _unfilter(kind: int, line: bytearray, previous: bytes, step: int) -> bytearray:
    for i in range(len(line)):
        left = line[i - step] if i >= step else 0
        up = previous[i]
        corner = previous[i - step] if i >= step else 0
        predictor = {0: 0, 1: left, 2: up, 3: (left + up) // 2,
                     4: _paeth(left, up, corner)}[kind]
        line[i] = (line[i] + predictor) & 0xFF
    return line


def read_png(data: bytes) -> Png:
    """Decode a PNG written as GE writes it (8-bit, RGB or RGBA, not interlaced), checking
    the signature and every chunk's CRC."""
    assert data[:8] == PNG_SIGNATURE, "not a PNG signature"
    position, idat, chunks = 8, b"", []
    width = height = channels = 0
    while position < len(data):
        (length,) = struct.unpack(">I", data[position:position + 4])
        kind = data[position + 4:position + 8]
        body = data[position + 8:position + 8 + length]
        (crc,) = struct.unpack(">I", data[position + 8 + length:position + 12 + length])
        assert zlib.crc32(kind + body) & 0xFFFFFFFF == crc, f"bad CRC in {kind!r}"
        chunks.append(kind)
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and color in (2, 6) and interlace == 0
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        position += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    assert len(raw) == height * (stride + 1)
    rows, previous = [], bytes(stride)
    for y in range(height):
        start = y * (stride + 1)
        line = _unfilter(raw[start], bytearray(raw[start + 1:start + 1 + stride]), previous,
                         channels) if raw[start] else raw[start + 1:start + 1 + stride]
        rows.append(bytes(line))
        previous = rows[-1]
    return Png(width, height, channels, rows, chunks)


def hex_rgb(color: str) -> bytes:
    """``#rrggbb`` as three bytes."""
    return bytes.fromhex(color.lstrip("#"))
