"""Image classifiers written from their papers' tables (no torchvision: none for torch 2.13 CPU).

Layer for layer these match torchvision's definitions (same parameter counts), so their operator
datasets are the ones a torchvision user would see.
"""

from __future__ import annotations

import torch
from torch import nn

IMAGENET_CLASSES = 1000


def _conv_bn(c_in: int, c_out: int, kernel: int, stride: int = 1) -> list[nn.Module]:
    return [nn.Conv2d(c_in, c_out, kernel, stride, padding=kernel // 2, bias=False), nn.BatchNorm2d(c_out)]


# ---------------------------------------------------------------------------------------------
# ResNet-50: He et al. 2016, Table 1 ("50-layer": bottleneck blocks [3, 4, 6, 3]).
RESNET50_BLOCKS = (3, 4, 6, 3)
RESNET_WIDTHS = (64, 128, 256, 512)
BOTTLENECK_EXPANSION = 4


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3, 1x1 expand; the stride sits on the 3x3 conv (ResNet v1.5, torchvision's)."""

    def __init__(self, c_in: int, width: int, stride: int) -> None:
        super().__init__()
        c_out = width * BOTTLENECK_EXPANSION
        self.body = nn.Sequential(
            *_conv_bn(c_in, width, 1),
            nn.ReLU(inplace=True),
            *_conv_bn(width, width, 3, stride),
            nn.ReLU(inplace=True),
            *_conv_bn(width, c_out, 1),
        )
        self.shortcut = (
            nn.Sequential(*_conv_bn(c_in, c_out, 1, stride)) if stride != 1 or c_in != c_out else nn.Identity()
        )
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.body(x) + self.shortcut(x))


def resnet50() -> nn.Module:
    layers: list[nn.Module] = [*_conv_bn(3, 64, 7, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)]
    c_in = 64
    for stage, (blocks, width) in enumerate(zip(RESNET50_BLOCKS, RESNET_WIDTHS, strict=False)):
        for b in range(blocks):
            stride = 2 if b == 0 and stage > 0 else 1
            layers.append(Bottleneck(c_in, width, stride))
            c_in = width * BOTTLENECK_EXPANSION
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c_in, IMAGENET_CLASSES)]
    return nn.Sequential(*layers)


# ---------------------------------------------------------------------------------------------
# VGG-16: Simonyan & Zisserman 2015, Table 1 configuration D; 3x3 convs with padding 1,
# "M" = 2x2 max-pooling with stride 2; three fully connected layers 4096, 4096, 1000.
VGG16_CONFIG = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")
VGG_FC = 4096
VGG_FINAL_MAP = 7  # 224 / 2^5


def vgg16() -> nn.Module:
    layers: list[nn.Module] = []
    c_in = 3
    for v in VGG16_CONFIG:
        if v == "M":
            layers.append(nn.MaxPool2d(2, 2))
        else:
            layers += [nn.Conv2d(c_in, int(v), 3, padding=1), nn.ReLU(inplace=True)]
            c_in = int(v)
    layers += [
        nn.Flatten(),
        nn.Linear(c_in * VGG_FINAL_MAP * VGG_FINAL_MAP, VGG_FC),
        nn.ReLU(inplace=True),
        nn.Dropout(),
        nn.Linear(VGG_FC, VGG_FC),
        nn.ReLU(inplace=True),
        nn.Dropout(),
        nn.Linear(VGG_FC, IMAGENET_CLASSES),
    ]
    return nn.Sequential(*layers)


# ---------------------------------------------------------------------------------------------
# DenseNet-121: Huang et al. 2017, Table 1; DenseNet-BC (bottleneck 4k channels, compression 0.5).
DENSENET121_BLOCKS = (6, 12, 24, 16)
GROWTH = 32
BOTTLENECK_FACTOR = 4
COMPRESSION = 0.5
DENSENET_STEM = 64


class DenseLayer(nn.Module):
    """BN-ReLU-Conv1x1(4k)-BN-ReLU-Conv3x3(k), its output concatenated to its input."""

    def __init__(self, c_in: int) -> None:
        super().__init__()
        inner = BOTTLENECK_FACTOR * GROWTH
        self.body = nn.Sequential(
            nn.BatchNorm2d(c_in),
            nn.ReLU(inplace=True),
            nn.Conv2d(c_in, inner, 1, bias=False),
            nn.BatchNorm2d(inner),
            nn.ReLU(inplace=True),
            nn.Conv2d(inner, GROWTH, 3, padding=1, bias=False),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, self.body(x)], 1)


def densenet121() -> nn.Module:
    layers: list[nn.Module] = [*_conv_bn(3, DENSENET_STEM, 7, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)]
    c = DENSENET_STEM
    for i, blocks in enumerate(DENSENET121_BLOCKS):
        for _ in range(blocks):
            layers.append(DenseLayer(c))
            c += GROWTH
        if i < len(DENSENET121_BLOCKS) - 1:
            c_out = int(c * COMPRESSION)
            layers += [nn.BatchNorm2d(c), nn.ReLU(inplace=True), nn.Conv2d(c, c_out, 1, bias=False), nn.AvgPool2d(2, 2)]
            c = c_out
    layers += [
        nn.BatchNorm2d(c),
        nn.ReLU(inplace=True),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(c, IMAGENET_CLASSES),
    ]
    return nn.Sequential(*layers)
