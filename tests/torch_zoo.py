"""Small versions of the seeds' networks in PyTorch (fewer layers and channels, the same modules
and so the same exported operators), exported by the TorchScript exporter (``dynamo=False``,
opset 17) for tests/graph/test_onnx_models.py. Imports torch: use only where it is installed."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torchvision
from torch import nn
from torchvision.models import resnet, squeezenet, video

#: every module here as it is: random weights (seeded), eval mode


class DcganGenerator(nn.Module):
    """The DCGAN example's generator with 4/8/16 channels: ConvTranspose2d, BatchNorm2d, ReLU, Tanh."""

    def __init__(self, nz: int = 16, ngf: int = 4) -> None:
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 4), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, 3, 4, 2, 1, bias=False), nn.Tanh())

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.main(z)


class DcganDiscriminator(nn.Module):
    """The DCGAN example's discriminator with 4/8 channels: strided Conv2d, BatchNorm2d, LeakyReLU(0.2),
    Sigmoid."""

    def __init__(self, ndf: int = 4) -> None:
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(3, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False), nn.Sigmoid())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.main(x)


class Bert(nn.Module):
    """A BERT-like encoder: token + position embeddings, LayerNorm, one layer of 4-D multi-head
    attention and an erf-GELU feed-forward."""

    def __init__(self, vocab: int = 30, hidden: int = 16, heads: int = 2, seq: int = 8) -> None:
        super().__init__()
        self.heads, self.dim = heads, hidden // heads
        self.tokens, self.positions = nn.Embedding(vocab, hidden), nn.Embedding(seq, hidden)
        self.norm0, self.norm1, self.norm2 = (nn.LayerNorm(hidden, eps=1e-12) for _ in range(3))
        self.q, self.k, self.v, self.proj = (nn.Linear(hidden, hidden) for _ in range(4))
        self.ff1, self.ff2 = nn.Linear(hidden, 2 * hidden), nn.Linear(2 * hidden, hidden)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        b, s = ids.shape
        x = self.norm0(self.tokens(ids) + self.positions(torch.arange(s).unsqueeze(0)))
        q, k, v = (lin(x).view(b, s, self.heads, self.dim).transpose(1, 2)
                   for lin in (self.q, self.k, self.v))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.dim)
        context = torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2).reshape(b, s, -1)
        x = self.norm1(x + self.proj(context))
        return self.norm2(x + self.ff2(nn.functional.gelu(self.ff1(x))))


class RobertaEmbeddings(nn.Module):
    """RoBERTa's embeddings as transformers writes them: the ids viewed (GPT-2's ``view(-1, s)``),
    position ids counted from the ids, past the padding ones (``cumsum(ids != pad) * mask +
    pad``), three tables, LayerNorm and an attention by einsum."""

    def __init__(self, vocab: int = 30, hidden: int = 16, seq: int = 8, pad: int = 1) -> None:
        super().__init__()
        self.pad = pad
        self.tokens, self.positions = nn.Embedding(vocab, hidden), nn.Embedding(seq + pad + 1, hidden)
        self.types = nn.Embedding(1, hidden)
        self.register_buffer("type_ids", torch.zeros(1, seq, dtype=torch.long))
        self.norm, self.q, self.k = nn.LayerNorm(hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, hidden)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        ids = ids.view(-1, ids.shape[-1])
        mask = ids.ne(self.pad).int()
        positions = (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() + self.pad
        types = torch.gather(self.type_ids.expand(ids.shape[0], -1), 1, positions - positions)
        x = self.norm(self.tokens(ids) + self.positions(positions) + self.types(types))
        return torch.einsum("bid,bjd->bij", self.q(x), self.k(x)).softmax(-1)


class LstmLm(nn.Module):
    """An LSTM language model: Embedding, 2-layer LSTM, Linear to the vocabulary."""

    def __init__(self, vocab: int = 20, hidden: int = 8) -> None:
        super().__init__()
        self.embed, self.lstm = nn.Embedding(vocab, hidden), nn.LSTM(hidden, hidden, 2)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        y, _ = self.lstm(self.embed(ids))
        return self.out(y)


class Gru(nn.Module):
    """A bidirectional 2-layer GRU (batch first), then Linear."""

    def __init__(self, width: int = 6, hidden: int = 8) -> None:
        super().__init__()
        self.gru = nn.GRU(width, hidden, 2, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * hidden, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.gru(x)
        return self.out(y)


class Dqn(nn.Module):
    """The Nature DQN with 8/16/16 channels: convs 8x8/4, 4x4/2, 3x3/1 with ReLU, two Linear layers."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(4, 8, 8, 4), nn.ReLU(), nn.Conv2d(8, 16, 4, 2), nn.ReLU(),
                                 nn.Conv2d(16, 16, 3, 1), nn.ReLU(), nn.Flatten(), nn.Linear(16 * 49, 32),
                                 nn.ReLU(), nn.Linear(32, 6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class SqueezeNet(nn.Module):
    """SqueezeNet 1.0's layers with fewer Fire modules and channels."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, 16, 7, 2), nn.ReLU(True), nn.MaxPool2d(3, 2, ceil_mode=True),
            squeezenet.Fire(16, 4, 8, 8), nn.MaxPool2d(3, 2, ceil_mode=True), squeezenet.Fire(16, 4, 8, 8),
            nn.Dropout(0.5), nn.Conv2d(16, 10, 1), nn.ReLU(True), nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class EncoderLayer(nn.Module):
    """nn.TransformerEncoderLayer (batch first) without its fast path, called on one input."""

    def __init__(self) -> None:
        super().__init__()
        torch.backends.mha.set_fastpath_enabled(False)
        self.layer = nn.TransformerEncoderLayer(16, 2, 32, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)


#: name -> (the module, an example input)
MODELS: dict[str, tuple[Callable[[], nn.Module], Callable[[], torch.Tensor]]] = {
    "resnet50": (lambda: resnet.ResNet(resnet.Bottleneck, [1, 1, 1, 1], num_classes=10, width_per_group=16),
                 lambda: torch.randn(1, 3, 32, 32)),
    "mobilenet_v2": (lambda: torchvision.models.MobileNetV2(10, 0.25, [[1, 16, 1, 1], [6, 24, 2, 2]]),
                     lambda: torch.randn(1, 3, 32, 32)),
    "squeezenet1_0": (SqueezeNet, lambda: torch.randn(1, 3, 48, 48)),
    "shufflenet_v2": (lambda: torchvision.models.ShuffleNetV2([1, 1, 1], [8, 16, 32, 64, 64], num_classes=10),
                      lambda: torch.randn(1, 3, 32, 32)),
    "r3d_18": (lambda: video.resnet.VideoResNet(video.resnet.BasicBlock, [video.resnet.Conv3DSimple] * 4,
                                                [1, 1, 1, 1], video.resnet.BasicStem, num_classes=10),
               lambda: torch.randn(1, 3, 4, 16, 16)),
    "dcgan_generator": (DcganGenerator, lambda: torch.randn(1, 16, 1, 1)),
    "dcgan_discriminator": (DcganDiscriminator, lambda: torch.randn(1, 3, 16, 16)),
    "bert": (Bert, lambda: torch.randint(0, 30, (1, 8))),
    "roberta_embeddings": (RobertaEmbeddings, lambda: torch.tensor([[0, 5, 7, 9, 2, 1, 1, 1]])),
    "transformer_encoder_layer": (EncoderLayer, lambda: torch.randn(1, 6, 16)),
    "lstm_lm": (LstmLm, lambda: torch.randint(0, 20, (5, 1))),
    "gru": (Gru, lambda: torch.randn(1, 5, 6)),
    "dqn": (Dqn, lambda: torch.randn(1, 4, 84, 84)),
}


def export(name: str, out: Path) -> tuple[Path, dict[str, np.ndarray]]:
    """Export model ``name`` (seed 0) to ``out/NAME.onnx``; the path and the input it was given."""
    make, example = MODELS[name]
    torch.manual_seed(0)
    net, x = make().eval(), example()
    path = out / f"{name}.onnx"
    with torch.no_grad():
        torch.onnx.export(net, (x,), str(path), input_names=["input"], output_names=["output"],
                          opset_version=17, dynamo=False)
    return path, {"input": x.numpy()}
