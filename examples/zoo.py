"""A small model zoo in plain PyTorch: the networks the ONNX frontend is tested and shown on.

Every model is built from the published architecture (no torchvision, nothing
downloaded), with deterministic random weights from a seed, in ``eval()`` mode,
and with BatchNorm running statistics / affine parameters set to non-trivial
random values so that BN-folding bugs show up numerically.

Models (``MODELS`` keys):

* ``resnet18`` / ``resnet50``: ImageNet ResNet (He et al. 2015), BasicBlock /
  Bottleneck; the Bottleneck puts its stride on the 3x3 conv ("v1.5", as most
  frameworks do). Input ``input`` [N, 3, 224, 224], output ``logits`` [N, 1000].
* ``mobilenet_v2``: MobileNetV2 (Sandler et al. 2018), width 1.0.
  Input ``input`` [N, 3, 224, 224], output ``logits`` [N, 1000].
* ``bert``: a 4-layer BERT-style encoder (hidden 256, 4 heads, FFN 1024) with
  attention written as plain MatMul/Div/Add(mask)/Softmax/MatMul.
  Inputs ``input_ids`` / ``attention_mask`` int64 [N, 128], output
  ``last_hidden_state`` [N, 128, 256].
* ``simple_cnn``: the SimpleCNN of the seed article, section 7.1.
  Input ``input`` [N, 3, 32, 32], output ``logits`` [N, 10].

Export uses the TorchScript-based exporter (``torch.onnx.export(...,
dynamo=False)``), which works offline in torch 2.13 (it only emits a
DeprecationWarning, silenced here); the dynamo exporter needs onnxscript.
In eval mode that exporter fuses BatchNorm into the preceding Conv; ``export_onnx``
keeps BatchNormalization nodes by default (see its ``fold_batchnorm``).
"""

from __future__ import annotations

import math
import os
import warnings
from typing import Callable, NamedTuple, TypeVar

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = [
    "MODELS",
    "ZooEntry",
    "bert_encoder",
    "example_feeds",
    "export_onnx",
    "mobilenet_v2",
    "resnet18",
    "resnet50",
    "run_onnxruntime",
    "simple_cnn",
    "torch_outputs",
]


# --------------------------------------------------------------------------
# Weight randomisation
# --------------------------------------------------------------------------


def _randomize_norms(model: nn.Module) -> None:
    """Give every BatchNorm / LayerNorm non-trivial statistics and affine params.

    BatchNorm: running_mean ~ N(0, 0.1^2), running_var ~ U(0.5, 1.5),
    weight ~ U(0.5, 1.5), bias ~ N(0, 0.1^2). LayerNorm: same for weight/bias.
    Uses the global torch RNG (seeded by the caller).
    """
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                assert m.running_mean is not None and m.running_var is not None
                m.running_mean.normal_(0.0, 0.1)
                m.running_var.uniform_(0.5, 1.5)
                if m.affine:
                    m.weight.uniform_(0.5, 1.5)
                    m.bias.normal_(0.0, 0.1)
            elif isinstance(m, nn.LayerNorm) and m.elementwise_affine:
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0.0, 0.1)


_M = TypeVar("_M", bound=nn.Module)


def _build(ctor: Callable[[], _M], seed: int) -> _M:
    """Build ``ctor()`` under ``torch.manual_seed(seed)`` without disturbing
    the caller's global RNG state; randomise norms; return it in eval mode."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = ctor()
        _randomize_norms(model)
    return model.eval()


# --------------------------------------------------------------------------
# ResNet
# --------------------------------------------------------------------------


def _conv3x3(cin: int, cout: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)


def _conv1x1(cin: int, cout: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, 1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes: int, planes: int, stride: int = 1,
                 downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = _conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = _conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1,
                 downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = _conv1x1(inplanes, planes)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = _conv3x3(planes, planes, stride)  # stride on the 3x3 ("v1.5")
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = _conv1x1(planes, planes * self.expansion)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, block: type[BasicBlock] | type[Bottleneck], layers: list[int],
                 num_classes: int = 1000) -> None:
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, 64, layers[0], 1)
        self.layer2 = self._make_layer(block, 128, layers[1], 2)
        self.layer3 = self._make_layer(block, 256, layers[2], 2)
        self.layer4 = self._make_layer(block, 512, layers[3], 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def _make_layer(self, block, planes: int, blocks: int, stride: int) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                _conv1x1(self.inplanes, planes * block.expansion, stride),
                nn.BatchNorm2d(planes * block.expansion),
            )
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        layers += [block(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x)


def resnet18(seed: int = 0, num_classes: int = 1000) -> nn.Module:
    return _build(lambda: ResNet(BasicBlock, [2, 2, 2, 2], num_classes), seed)


def resnet50(seed: int = 0, num_classes: int = 1000) -> nn.Module:
    return _build(lambda: ResNet(Bottleneck, [3, 4, 6, 3], num_classes), seed)


# --------------------------------------------------------------------------
# MobileNetV2
# --------------------------------------------------------------------------


def _make_divisible(v: float, divisor: int = 8) -> int:
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:  # do not round down by more than 10%
        new_v += divisor
    return new_v


class ConvBNReLU6(nn.Sequential):
    def __init__(self, cin: int, cout: int, kernel: int = 3, stride: int = 1,
                 groups: int = 1) -> None:
        super().__init__(
            nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
            nn.BatchNorm2d(cout),
            nn.ReLU6(inplace=True),
        )


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand_ratio: int) -> None:
        super().__init__()
        hidden = int(round(cin * expand_ratio))
        self.use_res_connect = stride == 1 and cin == cout
        layers: list[nn.Module] = []
        if expand_ratio != 1:
            layers.append(ConvBNReLU6(cin, hidden, kernel=1))  # pointwise expansion
        layers += [
            ConvBNReLU6(hidden, hidden, stride=stride, groups=hidden),  # depthwise 3x3
            nn.Conv2d(hidden, cout, 1, bias=False),  # linear bottleneck
            nn.BatchNorm2d(cout),
        ]
        self.conv = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


class MobileNetV2(nn.Module):
    # t (expansion), c (channels), n (repeats), s (first stride)
    SETTINGS = [
        (1, 16, 1, 1),
        (6, 24, 2, 2),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    ]

    def __init__(self, num_classes: int = 1000, width_mult: float = 1.0,
                 dropout: float = 0.2) -> None:
        super().__init__()
        cin = _make_divisible(32 * width_mult)
        self.last_channel = _make_divisible(1280 * max(1.0, width_mult))
        features: list[nn.Module] = [ConvBNReLU6(3, cin, stride=2)]
        for t, c, n, s in self.SETTINGS:
            cout = _make_divisible(c * width_mult)
            for i in range(n):
                features.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                cin = cout
        features.append(ConvBNReLU6(cin, self.last_channel, kernel=1))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(dropout),
                                        nn.Linear(self.last_channel, num_classes))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.normal_(m.bias, 0, 0.01)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        x = torch.flatten(F.adaptive_avg_pool2d(x, (1, 1)), 1)
        return self.classifier(x)


def mobilenet_v2(seed: int = 0, num_classes: int = 1000) -> nn.Module:
    return _build(lambda: MobileNetV2(num_classes), seed)


# --------------------------------------------------------------------------
# BERT-style encoder
# --------------------------------------------------------------------------

BERT_VOCAB = 1000
BERT_SEQ = 128
BERT_HIDDEN = 256


class BertSelfAttention(nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        assert hidden % heads == 0
        self.heads = heads
        self.head_dim = hidden // heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        n, seq, _ = x.size()
        return x.view(n, seq, self.heads, self.head_dim).permute(0, 2, 1, 3)  # [N, H, L, D]

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        q = self._split(self.query(x))
        k = self._split(self.key(x))
        v = self._split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        scores = scores + mask  # [N, 1, 1, L] additive mask
        probs = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        n, seq = ctx.size(0), ctx.size(1)
        return ctx.view(n, seq, self.heads * self.head_dim)


class BertLayer(nn.Module):
    def __init__(self, hidden: int, heads: int, intermediate: int, eps: float = 1e-12) -> None:
        super().__init__()
        self.attention = BertSelfAttention(hidden, heads)
        self.attn_out = nn.Linear(hidden, hidden)
        self.attn_norm = nn.LayerNorm(hidden, eps=eps)
        self.intermediate = nn.Linear(hidden, intermediate)
        self.act = nn.GELU()  # erf form
        self.output = nn.Linear(intermediate, hidden)
        self.out_norm = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.attn_norm(x + self.attn_out(self.attention(x, mask)))  # post-LN
        return self.out_norm(x + self.output(self.act(self.intermediate(x))))


class BertEncoder(nn.Module):
    position_ids: torch.Tensor
    token_type_ids: torch.Tensor

    def __init__(self, vocab: int = BERT_VOCAB, max_pos: int = BERT_SEQ, type_vocab: int = 2,
                 hidden: int = BERT_HIDDEN, layers: int = 4, heads: int = 4,
                 intermediate: int = 1024, eps: float = 1e-12) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden)
        self.position_embeddings = nn.Embedding(max_pos, hidden)
        self.token_type_embeddings = nn.Embedding(type_vocab, hidden)
        self.emb_norm = nn.LayerNorm(hidden, eps=eps)
        self.layers = nn.ModuleList(
            [BertLayer(hidden, heads, intermediate, eps) for _ in range(layers)])
        self.register_buffer("position_ids", torch.arange(max_pos).unsqueeze(0),
                             persistent=False)
        self.register_buffer("token_type_ids", torch.zeros(1, max_pos, dtype=torch.long),
                             persistent=False)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        seq = input_ids.size(1)
        x = (self.word_embeddings(input_ids)
             + self.position_embeddings(self.position_ids[:, :seq])
             + self.token_type_embeddings(self.token_type_ids[:, :seq]))
        x = self.emb_norm(x)
        ext = attention_mask[:, None, None, :].to(x.dtype)  # [N, 1, 1, L]
        ext = (1.0 - ext) * -10000.0
        for layer in self.layers:
            x = layer(x, ext)
        return x


def bert_encoder(seed: int = 0) -> nn.Module:
    return _build(BertEncoder, seed)


# --------------------------------------------------------------------------
# SimpleCNN (seed article, section 7.1)
# --------------------------------------------------------------------------


class SimpleCNN(nn.Module):
    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(32)
        self.relu1 = nn.ReLU()
        self.pool1 = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(64)
        self.relu2 = nn.ReLU()
        self.pool2 = nn.MaxPool2d(2)
        self.fc = nn.Linear(64 * 8 * 8, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool1(self.relu1(self.bn1(self.conv1(x))))
        x = self.pool2(self.relu2(self.bn2(self.conv2(x))))
        x = x.view(x.size(0), -1)
        return self.fc(x)


def simple_cnn(seed: int = 0) -> SimpleCNN:
    return _build(SimpleCNN, seed)


# --------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------


def _image_inputs(size: int) -> Callable[..., tuple[torch.Tensor, ...]]:
    def make(batch: int, seed: int = 0) -> tuple[torch.Tensor, ...]:
        g = torch.Generator().manual_seed(seed)
        return (torch.randn(batch, 3, size, size, generator=g, dtype=torch.float32),)
    return make


def _bert_inputs(batch: int, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Random ids in [0, vocab) and a mask of ones followed by >= 1 trailing zeros."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, BERT_VOCAB, (batch, BERT_SEQ), generator=g, dtype=torch.int64)
    lengths = torch.randint(BERT_SEQ // 4, BERT_SEQ, (batch,), generator=g)
    mask = (torch.arange(BERT_SEQ)[None, :] < lengths[:, None]).to(torch.int64)
    return ids, mask


class ZooEntry(NamedTuple):
    factory: Callable[..., nn.Module]  # factory(seed=0) -> eval-mode model
    inputs: Callable[..., tuple[torch.Tensor, ...]]  # inputs(batch, seed=0)
    input_names: list[str]
    output_names: list[str]
    dynamic_axes: dict[str, dict[int, str]]


def _image_entry(factory: Callable[..., nn.Module], size: int) -> ZooEntry:
    return ZooEntry(factory, _image_inputs(size), ["input"], ["logits"],
                    {"input": {0: "batch"}, "logits": {0: "batch"}})


MODELS: dict[str, ZooEntry] = {
    "resnet18": _image_entry(resnet18, 224),
    "resnet50": _image_entry(resnet50, 224),
    "mobilenet_v2": _image_entry(mobilenet_v2, 224),
    "bert": ZooEntry(
        bert_encoder, _bert_inputs, ["input_ids", "attention_mask"], ["last_hidden_state"],
        {"input_ids": {0: "batch"}, "attention_mask": {0: "batch"},
         "last_hidden_state": {0: "batch"}},
    ),
    "simple_cnn": _image_entry(simple_cnn, 32),
}


# --------------------------------------------------------------------------
# Export / run helpers
# --------------------------------------------------------------------------


def export_onnx(name: str, path: str | os.PathLike, batch: int = 1, dynamic_batch: bool = True,
                opset: int = 17, seed: int = 0, model: nn.Module | None = None,
                fold_batchnorm: bool = False) -> str:
    """Export zoo model ``name`` (built with ``seed`` unless ``model`` is given)
    to ``path`` with the TorchScript-based exporter; return ``path``.

    ``fold_batchnorm=False`` (default) keeps every BatchNorm as an ONNX
    ``BatchNormalization`` node (inference form, ``training_mode=0``), so the
    graph engine's own Conv+BN folding is exercised. It does so by exporting
    with ``training=TrainingMode.PRESERVE`` on the eval-mode model, which skips
    the exporter's eval-only Conv+BN fusion pass; constant folding still runs.
    ``fold_batchnorm=True`` is the exporter's default (``TrainingMode.EVAL``):
    BN is fused into the preceding Conv and no BatchNormalization node remains.
    """
    entry = MODELS[name]
    if model is None:
        model = entry.factory(seed=seed)
    model.eval()
    args = entry.inputs(batch, seed=seed)
    training = torch.onnx.TrainingMode.EVAL if fold_batchnorm else torch.onnx.TrainingMode.PRESERVE
    with warnings.catch_warnings():
        # legacy-exporter DeprecationWarning, tracer warnings, and the
        # "turn off constant folding in training-amenable mode" warning that
        # PRESERVE triggers (harmless: the model is in eval mode).
        warnings.simplefilter("ignore")
        with torch.no_grad():
            torch.onnx.export(
                model,
                args,
                str(path),
                dynamo=False,
                input_names=list(entry.input_names),
                output_names=list(entry.output_names),
                dynamic_axes=dict(entry.dynamic_axes) if dynamic_batch else None,
                opset_version=opset,
                do_constant_folding=True,
                export_params=True,
                training=training,
            )
    return str(path)


def example_feeds(name: str, batch: int = 1, seed: int = 0) -> dict[str, np.ndarray]:
    """Inputs for zoo model ``name`` keyed by the exported input names."""
    entry = MODELS[name]
    tensors = entry.inputs(batch, seed=seed)
    return {n: t.numpy() for n, t in zip(entry.input_names, tensors)}


def torch_outputs(model: nn.Module, feeds: dict[str, np.ndarray],
                  name: str | None = None) -> list[np.ndarray]:
    """Run a PyTorch zoo model on ``feeds`` (ordered as its input names)."""
    names = MODELS[name].input_names if name is not None else list(feeds)
    with torch.no_grad():
        out = model(*[torch.from_numpy(np.ascontiguousarray(feeds[n])) for n in names])
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [o.detach().numpy() for o in outs]


def run_onnxruntime(path: str | os.PathLike, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)
