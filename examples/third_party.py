"""Third-party-style models: small PyTorch re-creations of models users bring to GE.

Each builds the architecture of a real, widely deployed model (OCR, detection, speech,
file-type and keyword classifiers) at batch 1 and at a realistic size, in plain PyTorch
(no torchvision, nothing downloaded), with deterministic random weights from a seed, in
``eval()`` mode. Convolution and linear weights are drawn He-normal; BatchNorm / LayerNorm
affine parameters are random (``zoo``'s ``_build``), and BatchNorm running statistics are
those of each norm's input on the seed's feeds, perturbed at random (mean off by
N(0, 0.1^2) deviations, variance scaled by U(0.5, 1.5)), as training leaves them: deep
random stacks then neither blow up nor fade, and the outputs depend on the inputs (a DBNet
with unfitted statistics ends in logits of scale ~300, where a Sigmoid turns rounding into
errors of 1e-3). Everything is exported as a user would export it:
``torch.onnx.export(..., dynamo=False, opset_version=17)`` with the exporter's defaults
(eval mode: BatchNorm after a Conv is fused into it; after a ConvTranspose it stays).

Models (``MODELS`` keys; inputs -> outputs, all float32 unless said):

* ``dbnet_mbv3``: DBNet text detector on a MobileNetV3-small backbone (HardSwish,
  squeeze-excite with HardSigmoid, depthwise 3x3 / 5x5), DB-FPN (1x1 laterals, nearest
  upsampling and adds, concat of the upsampled levels) and the DB head (Conv3x3+BN+ReLU,
  two ConvTranspose 2x2 s2, Sigmoid). ``image`` [1, 3, 320, 320] ->
  ``probability`` [1, 1, 320, 320].
* ``convnext_det``: a ConvNeXt-femto detector stage: stem conv 4x4 s4 and channels-first
  LayerNorm, two stages of two ConvNeXt blocks (depthwise 7x7, channels-last LayerNorm,
  Linear 4x, exact GELU, Linear, layer scale, residual) joined by LayerNorm + conv 2x2
  s2, and a conv head. ``image`` [1, 3, 256, 256] -> ``predictions`` [1, 85, 32, 32].
* ``crnn``: CRNN text recognizer: VGG-style Conv+BN+ReLU / MaxPool stack down to height 1,
  a 2-layer bidirectional LSTM (hidden 256), Linear to 6625 classes, LogSoftmax.
  ``image`` [1, 3, 32, 320] -> ``log_probs`` [81, 1, 6625] (time, batch, class).
* ``svtr_tiny``: SVTR/ViT-style recognizer: three patch-embedding convs, 4 pre-norm
  transformer blocks of width 192 with 6 heads (attention as matmul / softmax), average
  over the height, Linear to 6625 classes, Softmax. ``image`` [1, 3, 32, 320] ->
  ``probs`` [1, 80, 6625].
* ``silero_vad``: a Silero-VAD-style voice activity detector: STFT as a Conv1d with a
  fixed Fourier basis (window 256, stride 128) after reflection padding, magnitude,
  Conv1d+ReLU encoder, one LSTM step (hidden 128) on the given state, Linear + Sigmoid.
  ``audio`` [1, 512], ``h`` and ``c`` [1, 1, 128] -> ``probability`` [1, 1],
  ``h_out`` and ``c_out`` [1, 1, 128]. Exported with the audio's length unfixed, as the
  published model is: the squeeze after the encoder then becomes an ``If`` whose
  un-squeezed branch can never feed the LSTM.
* ``yolo_nano``: YOLOv8n: Conv+BN+SiLU, C2f blocks (split, bottlenecks, concat), SPPF,
  upsample + concat neck, decoupled head with DFL (softmax over 16 bins, 1x1 conv with
  fixed arange weights), boxes decoded on the anchor grid, Sigmoid class scores.
  ``image`` [1, 3, 320, 320] -> ``detections`` [1, 84, 2100] (xywh, 80 class scores).
* ``magika_like``: a Magika-style file-type classifier: int64 bytes (0..255, 256 for
  padding) -> embedding 257x128 -> Dense+GELU -> LayerNorm -> 384 windows of 4 bytes ->
  Dense+GELU -> max over the windows -> LayerNorm -> Dense to 200 -> Softmax.
  ``bytes`` int64 [1, 1536] -> ``probs`` [1, 200].
* ``gru_kws``: a keyword spotter: Conv1d+BN+ReLU over time, 2-layer GRU (hidden 128),
  last step, Linear to 12, Softmax. ``features`` [1, 98, 40] -> ``probs`` [1, 12].
"""

from __future__ import annotations

import math
import os
import tempfile
import warnings
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from examples import zoo

__all__ = ["MODELS", "ThirdPartyModel"]


def _he_normal(model: nn.Module) -> nn.Module:
    """Draw every Conv / ConvTranspose / Linear weight He-normal (fan in, ReLU gain)."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (nn.Conv1d, nn.Conv2d, nn.Linear)):
                nn.init.kaiming_normal_(module.weight, nonlinearity="relu")
            elif isinstance(module, nn.ConvTranspose2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
    return model


def _fit_batchnorms(model: nn.Module, inputs: tuple[torch.Tensor, ...], seed: int) -> None:
    """Give every BatchNorm running statistics near those of its input on ``inputs``, as
    training leaves them: the mean off by N(0, 0.1^2) deviations, the variance scaled by
    U(0.5, 1.5). Activations then keep their scale through deep random stacks."""
    generator = torch.Generator().manual_seed(seed)

    def fit(norm: nn.Module, args: tuple[torch.Tensor, ...]) -> None:
        assert isinstance(norm, nn.modules.batchnorm._BatchNorm)
        assert norm.running_mean is not None and norm.running_var is not None
        x = args[0]
        axes = [0, *range(2, x.dim())]
        mean, variance = x.mean(axes), x.var(axes, unbiased=False).clamp_min(1e-3)
        shift = torch.randn(mean.shape, generator=generator)
        scale = torch.empty(mean.shape).uniform_(0.5, 1.5, generator=generator)
        norm.running_mean.copy_(mean + 0.1 * variance.sqrt() * shift)
        norm.running_var.copy_(variance * scale)

    hooks = [m.register_forward_pre_hook(fit) for m in model.modules()
             if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    try:
        with torch.no_grad():
            model(*inputs)
    finally:
        for hook in hooks:
            hook.remove()


def _conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1,
             act: nn.Module | None = None, eps: float = 1e-5) -> nn.Sequential:
    """Conv2d (no bias, "same" padding) + BatchNorm2d + an optional activation."""
    layers = [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
              nn.BatchNorm2d(cout, eps=eps)]
    return nn.Sequential(*layers, *([act] if act is not None else []))


# --------------------------------------------------------------------------
# DBNet on MobileNetV3-small
# --------------------------------------------------------------------------


class SqueezeExcite(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        squeezed = zoo._make_divisible(channels // 4)
        self.reduce = nn.Conv2d(channels, squeezed, 1)
        self.expand = nn.Conv2d(squeezed, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = F.adaptive_avg_pool2d(x, 1)
        return x * F.hardsigmoid(self.expand(F.relu(self.reduce(scale))))


class MobileBlockV3(nn.Module):
    def __init__(self, cin: int, kernel: int, expanded: int, cout: int, squeeze: bool,
                 hardswish: bool, stride: int) -> None:
        super().__init__()
        act = nn.Hardswish if hardswish else nn.ReLU
        layers: list[nn.Module] = []
        if expanded != cin:
            layers.append(_conv_bn(cin, expanded, 1, act=act()))
        layers.append(_conv_bn(expanded, expanded, kernel, stride, groups=expanded, act=act()))
        if squeeze:
            layers.append(SqueezeExcite(expanded))
        layers.append(_conv_bn(expanded, cout, 1))
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x) if self.residual else self.body(x)


class DBNet(nn.Module):
    # kernel, expanded, out, squeeze-excite, hardswish, stride (MobileNetV3-small)
    BLOCKS = [(3, 16, 16, True, False, 2), (3, 72, 24, False, False, 2),
              (3, 88, 24, False, False, 1), (5, 96, 40, True, True, 2),
              (5, 240, 40, True, True, 1), (5, 240, 40, True, True, 1),
              (5, 120, 48, True, True, 1), (5, 144, 48, True, True, 1),
              (5, 288, 96, True, True, 2), (5, 576, 96, True, True, 1),
              (5, 576, 96, True, True, 1)]
    TAPS = (0, 2, 7, 10)  # the blocks whose outputs feed the FPN: strides 4, 8, 16, 32

    def __init__(self, channels: int = 96) -> None:
        super().__init__()
        self.stem = _conv_bn(3, 16, 3, 2, act=nn.Hardswish())
        cin, blocks = 16, []
        for kernel, expanded, cout, squeeze, hardswish, stride in self.BLOCKS:
            blocks.append(MobileBlockV3(cin, kernel, expanded, cout, squeeze, hardswish, stride))
            cin = cout
        self.blocks = nn.ModuleList(blocks)
        tapped = [self.BLOCKS[i][2] for i in self.TAPS]
        self.laterals = nn.ModuleList(nn.Conv2d(c, channels, 1, bias=False) for c in tapped)
        self.smooth = nn.ModuleList(nn.Conv2d(channels, channels // 4, 3, padding=1, bias=False)
                                    for _ in tapped)
        quarter = channels // 4
        self.head = nn.Sequential(
            _conv_bn(channels, quarter, 3, act=nn.ReLU()),
            nn.ConvTranspose2d(quarter, quarter, 2, 2), nn.BatchNorm2d(quarter), nn.ReLU(),
            nn.ConvTranspose2d(quarter, 1, 2, 2), nn.Sigmoid())

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x, features = self.stem(image), []
        for index, block in enumerate(self.blocks):
            x = block(x)
            if index in self.TAPS:
                features.append(x)
        c2, c3, c4, c5 = [lateral(f) for lateral, f in zip(self.laterals, features)]
        p4 = c4 + F.interpolate(c5, scale_factor=2.0, mode="nearest")
        p3 = c3 + F.interpolate(p4, scale_factor=2.0, mode="nearest")
        p2 = c2 + F.interpolate(p3, scale_factor=2.0, mode="nearest")
        levels = [smooth(p) for smooth, p in zip(self.smooth, (p2, p3, p4, c5))]
        fused = torch.cat([levels[0]] + [F.interpolate(level, scale_factor=2.0 ** i,
                                                       mode="nearest")
                                         for i, level in enumerate(levels[1:], 1)], dim=1)
        return self.head(fused)


# --------------------------------------------------------------------------
# ConvNeXt detector stage
# --------------------------------------------------------------------------


class ChannelsFirstLayerNorm(nn.Module):
    """LayerNorm over the channels of an NCHW tensor, as ConvNeXt's code writes it."""

    def __init__(self, channels: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(channels).uniform_(0.5, 1.5))
        self.bias = nn.Parameter(torch.empty(channels).normal_(0.0, 0.1))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(1, keepdim=True)
        variance = (x - mean).pow(2).mean(1, keepdim=True)
        x = (x - mean) / torch.sqrt(variance + self.eps)
        return self.weight[:, None, None] * x + self.bias[:, None, None]


class ConvNeXtBlock(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.empty(dim).uniform_(0.1, 1.0))  # a trained layer scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dwconv(x).permute(0, 2, 3, 1)  # NCHW -> NHWC
        y = self.pwconv2(self.act(self.pwconv1(self.norm(y))))
        return x + (self.gamma * y).permute(0, 3, 1, 2)


class ConvNeXtDetector(nn.Module):
    def __init__(self, dims: tuple[int, int] = (48, 96), outputs: int = 85) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, dims[0], 4, 4), ChannelsFirstLayerNorm(dims[0]))
        self.stage1 = nn.Sequential(*(ConvNeXtBlock(dims[0]) for _ in range(2)))
        self.downsample = nn.Sequential(ChannelsFirstLayerNorm(dims[0]),
                                        nn.Conv2d(dims[0], dims[1], 2, 2))
        self.stage2 = nn.Sequential(*(ConvNeXtBlock(dims[1]) for _ in range(2)))
        self.head = nn.Sequential(nn.Conv2d(dims[1], dims[1], 3, padding=1), nn.ReLU(),
                                  nn.Conv2d(dims[1], outputs, 1))

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = self.stage1(self.stem(image))
        return self.head(self.stage2(self.downsample(x)))


# --------------------------------------------------------------------------
# CRNN
# --------------------------------------------------------------------------


class CRNN(nn.Module):
    # output channels per conv; "M" a 2x2 max pool, "H" a pool of the height only
    LAYERS = [32, "M", 64, "M", 128, 128, "H", 256, 256, "H"]

    def __init__(self, classes: int = 6625, hidden: int = 256) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        cin = 3
        for item in self.LAYERS:
            if item == "M":
                layers.append(nn.MaxPool2d(2, 2))
            elif item == "H":
                layers.append(nn.MaxPool2d((2, 2), (2, 1), (0, 1)))
            else:
                assert isinstance(item, int)
                layers.append(_conv_bn(cin, item, 3, act=nn.ReLU()))
                cin = item
        # the last conv (2x2, no padding) takes the height from 2 to 1
        layers += [nn.Conv2d(cin, cin, 2, bias=False), nn.BatchNorm2d(cin), nn.ReLU()]
        self.cnn = nn.Sequential(*layers)
        self.rnn = nn.LSTM(cin, hidden, num_layers=2, bidirectional=True)
        self.fc = nn.Linear(2 * hidden, classes)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        features = self.cnn(image).squeeze(2)  # [N, C, W]
        sequence, _ = self.rnn(features.permute(2, 0, 1))  # [T, N, 2H]
        return F.log_softmax(self.fc(sequence), dim=2)


# --------------------------------------------------------------------------
# SVTR-tiny-style recognizer
# --------------------------------------------------------------------------


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, length, dim = x.shape
        qkv = self.qkv(x).reshape(n, length, 3, self.heads, dim // self.heads)
        qkv = qkv.permute(2, 0, 3, 1, 4)  # [3, N, heads, L, D]
        q, k, v = qkv[0], qkv[1], qkv[2]
        attention = (q @ k.transpose(-2, -1)) * self.scale
        attention = attention.softmax(dim=-1)
        return self.proj((attention @ v).transpose(1, 2).reshape(n, length, dim))


class TransformerBlock(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attention = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class SVTR(nn.Module):
    def __init__(self, dim: int = 192, heads: int = 6, depth: int = 4,
                 classes: int = 6625) -> None:
        super().__init__()
        self.embed = nn.Sequential(  # 32x320 -> 4x80 patches
            _conv_bn(3, dim // 2, 3, 2, act=nn.GELU()),
            _conv_bn(dim // 2, dim, 3, 2, act=nn.GELU()),
            nn.Conv2d(dim, dim, 3, (2, 1), 1))
        self.position = nn.Parameter(torch.randn(1, 4 * 80, dim) * 0.02)
        self.blocks = nn.Sequential(*(TransformerBlock(dim, heads) for _ in range(depth)))
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.fc = nn.Linear(dim, classes)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = self.embed(image)  # [N, C, 4, 80]
        n, dim, height, width = x.shape
        x = self.norm(self.blocks(x.flatten(2).transpose(1, 2) + self.position))
        x = x.reshape(n, height, width, dim).mean(dim=1)  # [N, 80, C]
        return self.fc(x).softmax(dim=-1)


# --------------------------------------------------------------------------
# Silero-VAD-style detector
# --------------------------------------------------------------------------


class SileroVAD(nn.Module):
    window: torch.Tensor

    def __init__(self, frame: int = 256, hop: int = 128, hidden: int = 128) -> None:
        super().__init__()
        bins = frame // 2 + 1
        time = torch.arange(frame, dtype=torch.float64)
        angle = 2 * math.pi * torch.arange(bins, dtype=torch.float64)[:, None] * time / frame
        hann = torch.hann_window(frame, periodic=True, dtype=torch.float64)
        basis = torch.cat([torch.cos(angle), -torch.sin(angle)]) * hann  # [2 * bins, frame]
        self.register_buffer("window", basis[:, None, :].float())
        self.hop, self.bins = hop, bins
        self.encoder = nn.Sequential(
            nn.Conv1d(bins, 128, 3, padding=1), nn.ReLU(),
            nn.Conv1d(128, 64, 3, 2, 1), nn.ReLU(),
            nn.Conv1d(64, 64, 3, 2, 1), nn.ReLU(),
            nn.Conv1d(64, hidden, 3, padding=1), nn.ReLU())
        self.rnn = nn.LSTM(hidden, hidden)
        self.fc = nn.Linear(hidden, 1)

    def forward(self, audio: torch.Tensor, h: torch.Tensor,
                c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x = F.pad(audio.unsqueeze(1), (64, 64), mode="reflect")  # [N, 1, 640]
        spectrum = F.conv1d(x, self.window, stride=self.hop)  # [N, 2 * bins, 4]
        real, imaginary = spectrum[:, :self.bins], spectrum[:, self.bins:]
        magnitude = torch.sqrt(real * real + imaginary * imaginary)
        features = self.encoder(magnitude).squeeze(2)  # [N, hidden]
        out, (h_out, c_out) = self.rnn(features.unsqueeze(0), (h, c))
        return torch.sigmoid(self.fc(F.relu(out[0]))), h_out, c_out


# --------------------------------------------------------------------------
# YOLOv8n
# --------------------------------------------------------------------------


def _silu_conv(cin: int, cout: int, kernel: int = 1, stride: int = 1) -> nn.Sequential:
    return _conv_bn(cin, cout, kernel, stride, act=nn.SiLU(), eps=1e-3)  # YOLOv8's BN eps


class Bottleneck(nn.Module):
    def __init__(self, channels: int, shortcut: bool) -> None:
        super().__init__()
        self.cv1 = _silu_conv(channels, channels, 3)
        self.cv2 = _silu_conv(channels, channels, 3)
        self.shortcut = shortcut

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.cv2(self.cv1(x))
        return x + y if self.shortcut else y


class C2f(nn.Module):
    def __init__(self, cin: int, cout: int, repeats: int = 1, shortcut: bool = False) -> None:
        super().__init__()
        self.hidden = cout // 2
        self.cv1 = _silu_conv(cin, 2 * self.hidden)
        self.cv2 = _silu_conv((2 + repeats) * self.hidden, cout)
        self.m = nn.ModuleList(Bottleneck(self.hidden, shortcut) for _ in range(repeats))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = list(self.cv1(x).chunk(2, 1))
        y.extend(m(y[-1]) for m in self.m)
        return self.cv2(torch.cat(y, 1))


class SPPF(nn.Module):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.cv1 = _silu_conv(cin, cin // 2)
        self.cv2 = _silu_conv(cin // 2 * 4, cout)
        self.pool = nn.MaxPool2d(5, 1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = [self.cv1(x)]
        y.extend(self.pool(y[-1]) for _ in range(3))
        return self.cv2(torch.cat(y, 1))


class YOLOv8Head(nn.Module):
    bins: torch.Tensor
    anchors: torch.Tensor
    strides: torch.Tensor

    def __init__(self, channels: tuple[int, ...], size: int, classes: int = 80,
                 reg_max: int = 16) -> None:
        super().__init__()
        box, cls = max(16, channels[0] // 4, 4 * reg_max), max(channels[0], min(classes, 100))
        self.box = nn.ModuleList(nn.Sequential(_silu_conv(c, box, 3), _silu_conv(box, box, 3),
                                               nn.Conv2d(box, 4 * reg_max, 1)) for c in channels)
        self.cls = nn.ModuleList(nn.Sequential(_silu_conv(c, cls, 3), _silu_conv(cls, cls, 3),
                                               nn.Conv2d(cls, classes, 1)) for c in channels)
        self.reg_max, self.classes = reg_max, classes
        self.register_buffer("bins", torch.arange(reg_max, dtype=torch.float32).view(1, -1, 1, 1))
        anchors, strides = [], []
        for stride in (8, 16, 32):
            cells = torch.arange(size // stride, dtype=torch.float32) + 0.5
            y, x = torch.meshgrid(cells, cells, indexing="ij")
            anchors.append(torch.stack([x.flatten(), y.flatten()]))
            strides.append(torch.full((1, x.numel()), float(stride)))
        self.register_buffer("anchors", torch.cat(anchors, 1))  # [2, A]
        self.register_buffer("strides", torch.cat(strides, 1))  # [1, A]

    def forward(self, levels: list[torch.Tensor]) -> torch.Tensor:
        n = levels[0].shape[0]
        outputs = [torch.cat([box(x), cls(x)], 1).view(n, 4 * self.reg_max + self.classes, -1)
                   for x, box, cls in zip(levels, self.box, self.cls)]
        box, cls = torch.cat(outputs, 2).split((4 * self.reg_max, self.classes), 1)
        anchors = box.shape[2]
        distribution = box.view(n, 4, self.reg_max, anchors).transpose(2, 1).softmax(1)
        distance = F.conv2d(distribution, self.bins).view(n, 4, anchors)  # DFL
        left_top, right_bottom = distance.chunk(2, 1)
        top_left, bottom_right = self.anchors - left_top, self.anchors + right_bottom
        xywh = torch.cat([(top_left + bottom_right) / 2, bottom_right - top_left], 1)
        return torch.cat([xywh * self.strides, cls.sigmoid()], 1)


class YOLOv8n(nn.Module):
    def __init__(self, size: int = 320) -> None:
        super().__init__()
        self.stem = nn.Sequential(_silu_conv(3, 16, 3, 2), _silu_conv(16, 32, 3, 2),
                                  C2f(32, 32, 1, True), _silu_conv(32, 64, 3, 2),
                                  C2f(64, 64, 2, True))  # P3, stride 8
        self.p4 = nn.Sequential(_silu_conv(64, 128, 3, 2), C2f(128, 128, 2, True))
        self.p5 = nn.Sequential(_silu_conv(128, 256, 3, 2), C2f(256, 256, 1, True),
                                SPPF(256, 256))
        self.up4, self.up3 = C2f(384, 128), C2f(192, 64)
        self.down4, self.out4 = _silu_conv(64, 64, 3, 2), C2f(192, 128)
        self.down5, self.out5 = _silu_conv(128, 128, 3, 2), C2f(384, 256)
        self.head = YOLOv8Head((64, 128, 256), size)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        p3 = self.stem(image)
        p4 = self.p4(p3)
        p5 = self.p5(p4)
        up = lambda x: F.interpolate(x, scale_factor=2.0, mode="nearest")
        n4 = self.up4(torch.cat([up(p5), p4], 1))
        n3 = self.up3(torch.cat([up(n4), p3], 1))
        n4 = self.out4(torch.cat([self.down4(n3), n4], 1))
        n5 = self.out5(torch.cat([self.down5(n4), p5], 1))
        return self.head([n3, n4, n5])


# --------------------------------------------------------------------------
# Magika-style file-type classifier
# --------------------------------------------------------------------------


class MagikaLike(nn.Module):
    def __init__(self, length: int = 1536, width: int = 128, window: int = 4,
                 dense: int = 256, classes: int = 200) -> None:
        super().__init__()
        self.embedding = nn.Embedding(257, width)
        self.dense1 = nn.Linear(width, width)
        self.norm1 = nn.LayerNorm(width)
        self.windows, self.window_width = length // window, window * width
        self.dense2 = nn.Linear(window * width, dense)
        self.norm2 = nn.LayerNorm(dense)
        self.fc = nn.Linear(dense, classes)

    def forward(self, data: torch.Tensor) -> torch.Tensor:
        x = self.norm1(F.gelu(self.dense1(self.embedding(data))))
        x = x.reshape(-1, self.windows, self.window_width)
        x = torch.amax(F.gelu(self.dense2(x)), dim=1)
        return self.fc(self.norm2(x)).softmax(dim=-1)


# --------------------------------------------------------------------------
# GRU keyword spotter
# --------------------------------------------------------------------------


class KeywordSpotter(nn.Module):
    def __init__(self, features: int = 40, channels: int = 64, hidden: int = 128,
                 keywords: int = 12) -> None:
        super().__init__()
        self.conv = nn.Sequential(nn.Conv1d(features, channels, 3, padding=1, bias=False),
                                  nn.BatchNorm1d(channels), nn.ReLU())
        self.rnn = nn.GRU(channels, hidden, num_layers=2, batch_first=True)
        self.fc = nn.Linear(hidden, keywords)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        x = self.conv(features.transpose(1, 2)).transpose(1, 2)  # [N, T, C]
        sequence, _ = self.rnn(x)
        return self.fc(sequence[:, -1]).softmax(dim=-1)


# --------------------------------------------------------------------------
# Registry and export
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class ThirdPartyModel:
    """One model: its PyTorch class, how its inputs are drawn, its output names, and the
    input axes its export leaves unfixed (as the published model does)."""

    module: Callable[[], nn.Module]
    draw: Callable[[np.random.Generator], dict[str, np.ndarray]]  # input name -> array
    outputs: tuple[str, ...]
    dynamic: Optional[dict[str, dict[int, str]]] = None

    def build(self, seed: int = 0) -> nn.Module:
        """The module in eval mode, with weights drawn from ``seed`` and BatchNorm
        statistics fitted to ``feeds(seed)``."""
        module = zoo._build(lambda: _he_normal(self.module()), seed)
        inputs = tuple(torch.from_numpy(v) for v in self.feeds(seed).values())
        _fit_batchnorms(module, inputs, seed)
        return module

    def feeds(self, seed: int = 0) -> dict[str, np.ndarray]:
        """The inputs, by name, in the module's argument order, drawn from ``seed``."""
        return self.draw(np.random.default_rng(seed))

    def onnx(self, seed: int = 0, module: nn.Module | None = None) -> bytes:
        """The ONNX model (opset 17, TorchScript exporter, its defaults) of ``module``
        (default ``build(seed)``), traced on ``feeds(seed)``."""
        module = self.build(seed) if module is None else module.eval()
        feeds = self.feeds(seed)
        with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the legacy exporter's DeprecationWarning
            path = os.path.join(folder, "model.onnx")
            with torch.no_grad():
                torch.onnx.export(module, tuple(torch.from_numpy(v) for v in feeds.values()),
                                  path, dynamo=False, opset_version=17,
                                  input_names=list(feeds), output_names=list(self.outputs),
                                  dynamic_axes=self.dynamic)
            with open(path, "rb") as file:
                return file.read()

    def run_torch(self, module: nn.Module, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        """``module``'s outputs on ``feeds``, in the order of ``outputs``."""
        with torch.no_grad():
            result = module(*(torch.from_numpy(np.ascontiguousarray(v)) for v in feeds.values()))
        results = result if isinstance(result, (tuple, list)) else (result,)
        return [r.numpy() for r in results]


def _normal(name: str, *shape: int) -> Callable[[np.random.Generator], dict[str, np.ndarray]]:
    return lambda rng: {name: rng.standard_normal(shape).astype(np.float32)}


def _vad_inputs(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"audio": rng.uniform(-0.5, 0.5, (1, 512)).astype(np.float32),
            "h": (0.3 * rng.standard_normal((1, 1, 128))).astype(np.float32),
            "c": (0.3 * rng.standard_normal((1, 1, 128))).astype(np.float32)}


def _byte_inputs(rng: np.random.Generator) -> dict[str, np.ndarray]:
    data = rng.integers(0, 256, (1, 1536), dtype=np.int64)
    data[:, -100:] = 256  # a short file: padded at its end
    return {"bytes": data}


MODELS: dict[str, ThirdPartyModel] = {
    "dbnet_mbv3": ThirdPartyModel(DBNet, _normal("image", 1, 3, 320, 320), ("probability",)),
    "convnext_det": ThirdPartyModel(ConvNeXtDetector, _normal("image", 1, 3, 256, 256),
                                    ("predictions",)),
    "crnn": ThirdPartyModel(CRNN, _normal("image", 1, 3, 32, 320), ("log_probs",)),
    "svtr_tiny": ThirdPartyModel(SVTR, _normal("image", 1, 3, 32, 320), ("probs",)),
    "silero_vad": ThirdPartyModel(SileroVAD, _vad_inputs, ("probability", "h_out", "c_out"),
                                  {"audio": {1: "samples"}}),
    "yolo_nano": ThirdPartyModel(YOLOv8n, _normal("image", 1, 3, 320, 320), ("detections",)),
    "magika_like": ThirdPartyModel(MagikaLike, _byte_inputs, ("probs",)),
    "gru_kws": ThirdPartyModel(KeywordSpotter, _normal("features", 1, 98, 40), ("probs",)),
}
