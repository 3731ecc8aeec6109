"""The extra core ATen translations (``ge/frontends/torch_aten.py``): each op in a tiny
module through ``ge.parse_pytorch``, compiled and run, against torch eager (floats to
rtol 1e-5 / atol 1e-6, integers and bools exactly), with the GE op it must become; the
cases it refuses; and two small models that mix many of them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import ge
from ge.errors import UnsupportedOpError
from ge.frontends import torch as torch_frontend
from ge.frontends.torch_aten import TRANSLATED, decomposition_table, translations

RTOL, ATOL = 1e-5, 1e-6


@pytest.fixture(autouse=True)
def merged_translations(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch.py's table over this module's, as torch.py merges them."""
    original = torch_frontend._translations
    monkeypatch.setattr(torch_frontend, "_translations",
                        lambda: {**translations(), **original()})


class _Function(nn.Module):
    def __init__(self, function: Callable[..., Any]) -> None:
        super().__init__()
        self.function = function

    def forward(self, *inputs: torch.Tensor) -> Any:
        return self.function(*inputs)


class _Unary(_Function):
    """One named input, as ``dynamic_batch`` needs."""

    def forward(self, x: torch.Tensor) -> Any:  # type: ignore[override]
        return self.function(x)


def _compare(module: nn.Module, inputs: Sequence[torch.Tensor], graph: ge.Graph,
             feeds: Sequence[torch.Tensor] = ()) -> None:
    session = ge.Session(ge.compile(graph))
    feeds = list(feeds) or list(inputs)
    fed = {value.producer.name: tensor.numpy() for value, tensor in zip(graph.inputs, feeds)}
    results = session.run(fed)
    got = [results[spec.name] for spec in session.executable.outputs]
    with torch.no_grad():
        want = module(*feeds)
    want = list(want) if isinstance(want, (tuple, list)) else [want]
    assert len(got) == len(want)
    for a, b in zip(got, want):
        expected = b.numpy()
        assert a.shape == expected.shape, (a.shape, expected.shape)
        assert a.dtype == expected.dtype, (a.dtype, expected.dtype)
        if expected.dtype.kind == "f":
            np.testing.assert_allclose(a, expected, rtol=RTOL, atol=ATOL)
        else:
            np.testing.assert_array_equal(a, expected)


def _check(function: Callable[..., Any], inputs: Sequence[torch.Tensor],
           op_types: Sequence[str], dynamic_batch: bool = False) -> ge.Graph:
    module = _Unary(function) if dynamic_batch else _Function(function)
    graph = ge.parse_pytorch(module, list(inputs), dynamic_batch=dynamic_batch)
    present = {node.op_type for node in graph.nodes}
    assert set(op_types) <= present, f"missing {set(op_types) - present} in {sorted(present)}"
    _compare(module, inputs, graph)
    return graph


_generator = torch.Generator().manual_seed(0)


def _normal(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=_generator)


def _positive(*shape: int) -> torch.Tensor:
    return torch.rand(*shape, generator=_generator) + 0.1


def _integers(*shape: int, low: int = -5, high: int = 6) -> torch.Tensor:
    return torch.randint(low, high, shape, generator=_generator)


X = _normal(2, 3, 4)
P = _positive(2, 3, 4)
HALVES = torch.tensor([[0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49, 3.7]])
TINY = torch.tensor([[1e-10, -1e-8, 1e-5, 0.3, -0.7, 5.0, 30.0, -30.0, 80.0, 0.0]])
INTEGERS = _integers(2, 3, 4)
IMAGE = _normal(1, 2, 4, 4)
SCALE, OFFSET = torch.linspace(0.5, 2, 4), torch.linspace(-1, 1, 4)

CASES: dict[str, tuple[Callable[..., Any], Sequence[torch.Tensor], Sequence[str]]] = {
    # elementwise math
    "unary_math": (lambda x, p: (-x, x.abs(), x.exp(), x.erf(), p.reciprocal(), p.log(),
                                 p.sqrt(), p.rsqrt()), [X, P],
                   ["Neg", "Abs", "Exp", "Erf", "Reciprocal", "Log", "Sqrt"]),
    "trigonometry": (lambda x: (torch.sin(x), torch.cos(x), torch.tan(x), torch.atan(x),
                                torch.sinh(x), torch.asinh(x)), [X], ["Sin", "Cos", "Tan"]),
    "rounding": (lambda x, h: (torch.floor(x * 3), torch.ceil(x * 3), torch.round(h),
                               torch.trunc(h), torch.round(x * 7, decimals=2),
                               torch.round(x * 700, decimals=-1), torch.sign(x.round())),
                 [X, HALVES], ["Floor", "Ceil", "Round", "Sign", "Where"]),
    "log1p_expm1_tiny_and_large": (lambda t: (torch.log1p(t), torch.expm1(t)), [TINY],
                                   ["Log", "Exp", "Where"]),
    "integers": (lambda i: (torch.exp(i), torch.floor(i), torch.round(i), torch.abs(i), -i,
                            torch.sign(i), i ** 2, torch.clamp(i, 0, 3),
                            torch.clamp(i, min=0.5)), [INTEGERS],
                 ["Cast", "Exp", "Abs", "Neg", "Sign", "Pow", "Clip"]),
    "pow": (lambda p, x: (p ** 2.5, p ** 2, p ** -1, p ** x, 2.0 ** x), [P, X], ["Pow"]),
    "clamp": (lambda x, y: (torch.clamp(x, -0.5, 0.5), torch.clamp(x, min=0.1),
                            torch.clamp(x, max=0.1), torch.clamp(x, y - 1, y + 1)),
              [X, X.flip(0)], ["Clip", "Max", "Min"]),
    "maximum_minimum": (lambda x, y, i: (torch.maximum(x, y), torch.minimum(x, y),
                                         torch.maximum(x, i)), [X, X.flip(0), INTEGERS],
                        ["Max", "Min", "Cast"]),
    "where": (lambda x: (torch.where(x > 0, x, x * 2), x.masked_fill(x > 0.5, float("-inf")),
                         torch.where(x > 0, 1, 0), torch.where(x > 0, x, torch.tensor(2.5))),
              [X], ["Where", "Greater"]),
    "comparisons": (lambda x, y, i: (x == y, x != y, x < y, x <= y, x > y, x >= y, x == 0.0,
                                     x != 0.0, x < 0.5, x <= 0.5, x > -0.5, x >= -0.5,
                                     i == 1.5, i < 1.5, i >= 2),
                    [X.round(), X.flip(0).round(), INTEGERS],
                    ["Equal", "Not", "Less", "LessOrEqual", "Greater", "GreaterOrEqual",
                     "Cast"]),
    "logical": (lambda x: (torch.logical_and(x > 0, x < 1), torch.logical_or(x > 1, x < -1),
                           torch.logical_xor(x > 0, x < 1), torch.logical_not(x > 0),
                           torch.logical_and(x, x.round()), ~(x > 0), (x > 0) & (x < 1),
                           (x > 1) | (x < -1)), [X], ["And", "Or", "Xor", "Not", "Cast"]),
    "bitwise_integers": (lambda i: (~i, i & 3, i | 4, i ^ i.flip(0)), [INTEGERS],
                         ["BitwiseNot", "BitwiseAnd", "BitwiseOr", "BitwiseXor"]),
    "division_floor_floats": (lambda x, y: torch.div(x, y, rounding_mode="floor"),
                              [torch.tensor([1.0, -1.0, 7.5, -7.5, 0.0, -0.0, 3.0, 1e-3]),
                               torch.tensor([0.1, 0.1, 2.0, 2.0, -3.0, 3.0, 0.0, -7.0])],
                              ["Mod", "Floor", "Where"]),
    "division_rounding": (lambda x, i: (i // 3, torch.div(i, -2, rounding_mode="floor"),
                                        torch.div(x * 5, 2, rounding_mode="trunc"),
                                        torch.div(i, 3, rounding_mode="trunc"),
                                        torch.div(i, 4, rounding_mode=None)), [X, INTEGERS],
                          ["Mod", "Div", "Ceil"]),
    "remainder_fmod": (lambda x, i: (x % 0.7, torch.fmod(x, 0.7), i % 3, torch.fmod(i, -3)),
                       [X, INTEGERS], ["Mod"]),
    "isnan_isinf": (lambda x: (torch.isnan(x), torch.isinf(x)),
                    [torch.tensor([1.0, float("nan"), float("inf"), -float("inf")])],
                    ["IsNaN", "IsInf"]),
    # activations
    "activations": (lambda x: (F.leaky_relu(x, 0.2), F.elu(x, 0.5), F.selu(x),
                               F.log_softmax(x, dim=1)), [X],
                    ["LeakyRelu", "Elu", "Selu", "LogSoftmax"]),
    "softplus_mish_whole": (lambda x: (F.softplus(x), F.mish(x)), [X * 10],
                            ["Softplus", "Mish"]),
    # reductions
    "sums_and_extremes": (lambda x, i: (torch.amax(x, 1), torch.amin(x, (0, 2), keepdim=True),
                                        x.sum(1), x.sum(), x.sum((0, 2), keepdim=True),
                                        (x > 0).sum(1), i.sum(), x.mean(), x.prod(1),
                                        x.prod(), x.prod(2, keepdim=True), i.prod(1)),
                          [X, INTEGERS],
                          ["ReduceMax", "ReduceMin", "ReduceSum", "ReduceMean", "ReduceProd"]),
    "variance": (lambda x: (x.var(1), x.var(), x.var((0, 2), unbiased=False, keepdim=True),
                            *torch.var_mean(x, 2), x.std(1, keepdim=True)), [X],
                 ["ReduceMean", "ReduceSum", "Div", "Sqrt"]),
    "arg_and_indexed_extremes": (lambda x: (x.argmax(1), x.argmin(2, keepdim=True), x.argmax(),
                                            x.argmin(keepdim=True), *x.max(1),
                                            *x.min(2, keepdim=True), x.max(), x.min()), [X],
                                 ["ReduceMax", "ArgMax", "ReduceMin", "ArgMin"]),
    "any_all_norms": (lambda x: ((x > 1).any(1), (x > -3).all(), (x > 0).any(),
                                 F.normalize(x, dim=1), torch.linalg.vector_norm(x, 1, dim=2),
                                 torch.linalg.vector_norm(x, float("inf"), dim=(1, 2)),
                                 torch.logsumexp(x, 1)), [X],
                      ["ReduceMax", "ReduceL2", "ReduceL1", "ReduceSum"]),
    "scans_and_sorting": (lambda x: (x.cumsum(1), (x > 0).long().cumsum(-1), *x.topk(2, 1),
                                     *x.topk(3, largest=False), *x.sort(1),
                                     *x.sort(descending=True), x.argsort(0)), [X],
                          ["CumSum", "TopK"]),
    # joining, splitting, selecting
    "cat": (lambda x, y, i: (torch.cat([x, y, x], 1), torch.cat([x, i], 2),
                             torch.stack([x, x * 2], 1)), [X, X.flip(0), INTEGERS],
            ["Cast", "Concat"]),
    "split_squeeze_select": (lambda x: (*x.split([1, 3], 2), *x.chunk(2, 2), *x.split(2, 1),
                                        x[:, :1].squeeze(1), x[:1, :1].squeeze(), x.squeeze(0),
                                        x[:, 1], x[-1], x[..., -2]), [X],
                             ["Split", "Squeeze", "Gather"]),
    "index_select_gather": (
        lambda x, i: (x.index_select(1, torch.tensor([2, 0, 2])),
                      x.index_select(2, torch.tensor(1)),
                      x.index_select(2, i.abs().flatten()[:5] % 4),
                      x.gather(1, torch.tensor([[[0], [2]], [[1], [1]]]).expand(2, 2, 4)),
                      x.gather(2, torch.tensor([[[3, 0]]]))), [X, INTEGERS],
        ["Gather", "GatherElements"]),
    "index": (lambda x: (x[torch.tensor([1, 0, 1])], x[:, torch.tensor([[0, 2]])],
                         x[:, :, torch.tensor([-1, 0])],
                         x[:, torch.tensor([0, 2]), torch.tensor([[1], [3]])],
                         x[torch.tensor([1, 0]), :, torch.tensor([3, -1])]), [X],
              ["Gather", "GatherND", "Transpose"]),
    "pad_repeat_flip_copy": (lambda x: (F.pad(x, (1, 2)), F.pad(x, (0, 1, -1, 2), value=3.0),
                                        x.repeat(1, 2, 1), x.repeat(2, 1, 1, 3), x.flip(1),
                                        x.flip(0, 2), torch.empty_like(x).copy_(x[0] * 2)),
                             [X], ["Pad", "Tile", "Slice", "Expand"]),
    "tril_triu": (lambda x: (torch.tril(x), torch.triu(x, 1)), [X], ["Where", "LessOrEqual"]),
    # tensors made from nothing
    "created": (lambda x: (x + torch.full((3, 4), 2.0), torch.full_like(x, 3.0),
                           torch.zeros_like(x) + x, torch.ones_like(x, dtype=torch.long),
                           torch.maximum(x, torch.arange(4)), x + torch.arange(0, 2, 0.5),
                           torch.arange(1, 9, 2) == 3), [X], ["Const"]),
    # resampling, pooling, normalization
    "upsample_nearest": (lambda x: (F.interpolate(x, scale_factor=2),
                                    F.interpolate(x, size=(6, 10)),
                                    F.interpolate(x, size=(7, 3))), [IMAGE], ["Resize"]),
    "upsample_bilinear": (lambda x, y: (
        F.interpolate(x, scale_factor=2, mode="bilinear"),
        F.interpolate(x, size=(5, 7), mode="bilinear"),
        F.interpolate(x, size=(3, 1), mode="bilinear"),
        F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True),
        F.interpolate(x, size=(7, 1), mode="bilinear", align_corners=True),
        F.interpolate(y, scale_factor=1.5, mode="bilinear")),
        [IMAGE, _normal(1, 2, 5, 3)], ["Resize"]),
    "adaptive_avg_pool": (lambda x: (F.adaptive_avg_pool2d(x, 2), F.adaptive_avg_pool2d(x, 1),
                                     F.adaptive_avg_pool2d(x, (4, 1))), [IMAGE], ["AvgPool"]),
    "normalization": (lambda x, y: (F.group_norm(x, 2, SCALE, OFFSET), F.group_norm(y, 4),
                                    F.instance_norm(x),
                                    F.instance_norm(x, weight=SCALE, bias=OFFSET)),
                      [_normal(2, 4, 3, 3), _normal(2, 4, 5)],
                      ["GroupNormalization", "ReduceMean", "Sqrt"]),
    "attention": (lambda q, k, v: (F.scaled_dot_product_attention(q, k, v),
                                   F.scaled_dot_product_attention(q, k, v, is_causal=True)),
                  [_normal(1, 2, 5, 8), _normal(1, 2, 5, 8), _normal(1, 2, 5, 8)],
                  ["Softmax", "Where", "ReduceMax"]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_op_matches_torch_eager(name: str) -> None:
    function, inputs, op_types = CASES[name]
    _check(function, inputs, op_types)


def test_nearest_upsampling_reads_atens_pixels_by_gather_where_resize_would_not() -> None:
    # ATen steps by float32(1 / 1.7); Resize would step by 4 / 6
    graph = _check(lambda x: F.interpolate(x, scale_factor=1.7), [IMAGE], ["Gather"])
    assert "Resize" not in {node.op_type for node in graph.nodes}


def test_dynamic_batch() -> None:
    _check(lambda x: (torch.full_like(x, 2.0), x.flip(0), x[:, torch.tensor([2, 0])],
                      x.amax(1), x.cumsum(1), x.sort(2)[0]), [X], ["Expand", "Shape"],
           dynamic_batch=True)


# -- ops a frontend keeps whole (decomposition_table) ------------------------------------

def _check_preserved(function: Callable[..., Any], inputs: Sequence[torch.Tensor],
                     op_types: Sequence[str]) -> None:
    module = _Function(function).eval()
    exported = torch.export.export(module, tuple(inputs))
    exported = exported.run_decompositions(decomposition_table())
    graph = torch_frontend._translate(exported, "preserved")
    present = {node.op_type for node in graph.nodes}
    assert set(op_types) <= present, f"missing {set(op_types) - present} in {sorted(present)}"
    _compare(module, inputs, graph)


PRESERVED_CASES: dict[str, tuple[Callable[..., Any], Sequence[torch.Tensor], Sequence[str]]] = {
    "silu": (F.silu, [X], ["Swish"]),
    "hardswish": (F.hardswish, [X * 4], ["HardSwish"]),
    "hardsigmoid": (F.hardsigmoid, [X * 4], ["HardSigmoid"]),
    "mish": (F.mish, [X * 10], ["Mish"]),
    "softplus": (lambda x: (F.softplus(x), F.softplus(x, beta=2.0)), [X * 10], ["Softplus"]),
    "pixel_shuffle": (lambda x: F.pixel_shuffle(x, 2), [_normal(1, 8, 3, 3)],
                      ["DepthToSpace"]),
    "pixel_unshuffle": (lambda x: F.pixel_unshuffle(x, 2), [_normal(1, 2, 4, 6)],
                        ["SpaceToDepth"]),
    "reflection_pad": (lambda x: (F.pad(x, (1, 2, 2, 1), mode="reflect"),
                                  F.pad(x[0], (1, 2), mode="reflect")), [IMAGE], ["Pad"]),
    "replication_pad": (lambda x: (F.pad(x, (1, 2, 0, 3), mode="replicate"),
                                   F.pad(x[0], (2, 1), mode="replicate")), [IMAGE], ["Pad"]),
}


@pytest.mark.parametrize("name", list(PRESERVED_CASES))
def test_preserved_op_matches_torch_eager(name: str) -> None:
    function, inputs, op_types = PRESERVED_CASES[name]
    _check_preserved(function, inputs, op_types)


# -- refused ----------------------------------------------------------------------------

DECLINED: dict[str, tuple[Callable[..., Any], Sequence[torch.Tensor], str]] = {
    "adaptive_pool_uneven": (lambda x: F.adaptive_avg_pool2d(x, 3), [_normal(1, 2, 5, 5)],
                             "divide"),
    "elu_input_scale": (lambda x: torch.ops.aten.elu(x, 1.0, 1.0, 2.0), [X], "input_scale"),
    "vector_norm_order_3": (lambda x: torch.linalg.vector_norm(x, 3, dim=1), [X], "order 3"),
}


@pytest.mark.parametrize("name", list(DECLINED))
def test_what_cannot_be_mapped_exactly_is_refused(name: str) -> None:
    function, inputs, reason = DECLINED[name]
    with pytest.raises(UnsupportedOpError, match=reason):
        ge.parse_pytorch(_Function(function), list(inputs))


def test_a_boolean_mask_index_is_refused() -> None:
    # torch.export checks the data-dependent size with operators GE does not translate, so
    # the translation is called here on the node itself
    exported = torch.export.export(_Function(lambda x: x[x > 0]), (X,)).run_decompositions()
    node = next(n for n in exported.graph.nodes if n.target is torch.ops.aten.index.Tensor)
    context = torch_frontend._Context(ge.Graph("mask"))
    with pytest.raises(UnsupportedOpError, match="boolean mask"):
        translations()[node.target](context, node)


def test_refused_on_a_symbolic_batch() -> None:
    with pytest.raises(UnsupportedOpError, match="symbolic"):
        ge.parse_pytorch(_Unary(lambda x: x.var(0)), [X], dynamic_batch=True)


def test_softplus_with_a_low_threshold_is_refused() -> None:
    with pytest.raises(UnsupportedOpError, match="threshold"):
        _check_preserved(lambda x: F.softplus(x, threshold=1.0), [X], [])


def test_translated_names_the_table() -> None:
    names = {str(op).removeprefix("aten.") for op in translations()}
    assert names == set(TRANSLATED)


# -- small models -----------------------------------------------------------------------

def _conv(channels_in: int, channels_out: int, kernel: int, stride: int = 1) -> nn.Module:
    return nn.Sequential(nn.Conv2d(channels_in, channels_out, kernel, stride, kernel // 2,
                                   bias=False), nn.BatchNorm2d(channels_out), nn.SiLU())


class TinyYoloHead(nn.Module):
    """A YOLO-like neck and head: SiLU convolutions, an SPPF block (max pools, cat),
    nearest upsampling, cat, and the box decoding (sigmoid, split, grid, anchors)."""

    anchors: torch.Tensor

    def __init__(self, classes: int = 2) -> None:
        super().__init__()
        self.outputs = 5 + classes
        self.stem, self.down = _conv(3, 8, 3, 2), _conv(8, 16, 3, 2)
        self.pool = nn.MaxPool2d(5, 1, 2)
        self.fuse = _conv(64, 16, 1)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.head = nn.Conv2d(24, 3 * self.outputs, 1)
        self.register_buffer("anchors", torch.tensor([[1.0, 1.5], [2.0, 1.0], [3.0, 2.5]]))

    def forward(self, image: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        shallow = self.stem(image)
        deep = self.down(shallow)
        first = self.pool(deep)
        second = self.pool(first)
        deep = self.fuse(torch.cat([deep, first, second, self.pool(second)], 1))
        features = self.head(torch.cat([self.up(deep), shallow], 1))
        batch, _, height, width = features.shape
        grid_y, grid_x = torch.meshgrid(torch.arange(height, dtype=torch.float32),
                                        torch.arange(width, dtype=torch.float32), indexing="ij")
        grid = torch.stack([grid_x, grid_y], -1).view(1, 1, height, width, 2)
        raw = features.view(batch, 3, self.outputs, height, width).permute(0, 1, 3, 4, 2)
        xy, wh, scores = raw.sigmoid().split([2, 2, self.outputs - 4], -1)
        xy = (xy * 2 - 0.5 + grid) * 2.0
        wh = (wh * 2) ** 2 * self.anchors.view(1, 3, 1, 1, 2)
        boxes = torch.cat([xy, wh, scores], -1).view(batch, -1, self.outputs)
        best = boxes[..., 5:].amax(-1) * boxes[..., 4]
        return boxes, best.topk(5, dim=1).indices


class TinySpeechBlock(nn.Module):
    """A speech front end and encoder block: log compression, per-utterance normalization
    (var_mean), a length mask, causal self-attention, a gated (GLU) feed-forward layer."""

    def __init__(self, features: int = 8, width: int = 16) -> None:
        super().__init__()
        self.project = nn.Linear(features, width)
        self.norm = nn.LayerNorm(width)
        self.query_key_value = nn.Linear(width, 3 * width)
        self.gate = nn.Linear(width, 2 * width)
        self.out = nn.Linear(width, 4)

    def forward(self, spectrum: torch.Tensor, lengths: torch.Tensor) -> tuple[Any, ...]:
        logs = torch.log(torch.clamp(spectrum ** 2, min=1e-5))
        variance, mean = torch.var_mean(logs, dim=1, keepdim=True)
        hidden = self.project((logs - mean) * torch.rsqrt(variance + 1e-5))
        steps = torch.arange(spectrum.shape[1]).unsqueeze(0)
        valid = steps < lengths.unsqueeze(1)
        hidden = hidden.masked_fill(~valid.unsqueeze(-1), 0.0)
        q, k, v = self.query_key_value(self.norm(hidden)).view(
            hidden.shape[0], -1, 2, 24).transpose(1, 2).chunk(3, -1)
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        hidden = hidden + attended.transpose(1, 2).reshape(hidden.shape)
        hidden = hidden + F.glu(self.gate(hidden), -1)
        logits = self.out(hidden)
        frames = valid.sum(1, keepdim=True).clamp(min=1).float()
        pooled = logits.masked_fill(~valid.unsqueeze(-1), 0.0).sum(1) / frames
        return F.log_softmax(logits, -1), pooled.argmax(-1), pooled


def test_tiny_yolo_head_matches_torch_eager_at_every_batch() -> None:
    module = TinyYoloHead().eval()
    for batch_norm in (m for m in module.modules() if isinstance(m, nn.BatchNorm2d)):
        assert batch_norm.running_mean is not None and batch_norm.running_var is not None
        batch_norm.running_mean.uniform_(-0.2, 0.2, generator=_generator)
        batch_norm.running_var.uniform_(0.5, 1.5, generator=_generator)
    graph = ge.parse_pytorch(module, [_normal(2, 3, 16, 16)], dynamic_batch=True)
    present = {node.op_type for node in graph.nodes}
    assert {"Resize", "Concat", "Split", "TopK", "ReduceMax"} <= present
    for batch in (1, 3):
        _compare(module, [], graph, [_normal(batch, 3, 16, 16)])


def test_tiny_speech_block_matches_torch_eager() -> None:
    module = TinySpeechBlock().eval()
    inputs = [_normal(2, 6, 8), torch.tensor([6, 3])]
    graph = ge.parse_pytorch(module, inputs)
    present = {node.op_type for node in graph.nodes}
    assert {"Clip", "Less", "Where", "ArgMax", "LogSoftmax", "Not"} <= present
    _compare(module, inputs, graph)
    _compare(module, inputs, graph, [_normal(2, 6, 8), torch.tensor([2, 5])])
