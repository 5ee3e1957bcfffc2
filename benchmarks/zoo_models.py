"""The seeds' networks, built with random weights and exported to ONNX by PyTorch (no download).

python benchmarks/zoo_models.py [--out DIR] [--batches 1 16] [--models resnet50 bert ...] [--dynamo]

The set the TVM and Ansor papers evaluate: torchvision's ``resnet50``, ``mobilenet_v2`` and
``r3d_18`` (3D-ResNet-18, input 3x16x112x112), the generator and discriminator of PyTorch's DCGAN
example (64x64 images), a BERT-base encoder (12 layers, hidden 768, 12 heads, sequence 128),
an LSTM language model (PTB "medium": vocabulary 10,000, hidden 650, 2 layers, sequence 35) and
the Nature DQN (84x84x4 frames, 18 actions). Each is exported at every batch size by the
TorchScript exporter (``dynamo=False``, opset 17) to ``DIR/NAME_bBATCH.onnx`` (default
benchmarks/results/zoo/, not committed: ResNet-50 is ~100 MB); with ``--dynamo`` also by the
dynamo exporter where ``onnxscript`` is installed (``NAME_bBATCH_dynamo.onnx``).

BERT comes from ``transformers`` built from its config (``BertModel(BertConfig())``, random
weights) when that package imports, else from the torch.nn encoder below, written as BERT is:
token and position embeddings (Gather), 4-D multi-head attention, erf GELU, LayerNorm.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

ZOO = Path(__file__).resolve().parent / "results" / "zoo"


class DcganGenerator(nn.Module):
    """The generator of PyTorch's DCGAN example: a 100-d code to a 3x64x64 image."""

    def __init__(self, nz: int = 100, ngf: int = 64, nc: int = 3) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        widths = [nz, ngf * 8, ngf * 4, ngf * 2, ngf]
        for i, (cin, cout) in enumerate(zip(widths, widths[1:], strict=False)):
            stride, pad = (1, 0) if i == 0 else (2, 1)
            layers += [
                nn.ConvTranspose2d(cin, cout, 4, stride, pad, bias=False),
                nn.BatchNorm2d(cout),
                nn.ReLU(True),
            ]
        layers += [nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False), nn.Tanh()]
        self.main = nn.Sequential(*layers)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.main(z)


class DcganDiscriminator(nn.Module):
    """The discriminator of PyTorch's DCGAN example: a 3x64x64 image to a probability."""

    def __init__(self, ndf: int = 64, nc: int = 3) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Conv2d(nc, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True)]
        for mult in (1, 2, 4):
            cin, cout = ndf * mult, ndf * mult * 2
            layers += [
                nn.Conv2d(cin, cout, 4, 2, 1, bias=False),
                nn.BatchNorm2d(cout),
                nn.LeakyReLU(0.2, True),
            ]
        layers += [nn.Conv2d(ndf * 8, 1, 4, 1, 0, bias=False), nn.Sigmoid()]
        self.main = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.main(x)


class Dqn(nn.Module):
    """The Nature DQN: three convolutions and two dense layers over 4 stacked 84x84 frames."""

    def __init__(self, actions: int = 18) -> None:
        super().__init__()
        self.convs = nn.Sequential(
            nn.Conv2d(4, 32, 8, 4),
            nn.ReLU(),
            nn.Conv2d(32, 64, 4, 2),
            nn.ReLU(),
            nn.Conv2d(64, 64, 3, 1),
            nn.ReLU(),
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(3136, 512), nn.ReLU(), nn.Linear(512, actions))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.convs(x))


class LstmLm(nn.Module):
    """An LSTM language model (PTB "medium"): embedding, 2-layer LSTM, linear to the vocabulary."""

    def __init__(self, vocab: int = 10000, hidden: int = 650, layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.lstm = nn.LSTM(hidden, hidden, layers, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        y, _ = self.lstm(self.embed(tokens))
        return self.out(y)


class BertLayer(nn.Module):
    """One BERT encoder layer: 4-D multi-head self-attention, then the erf-GELU feed-forward."""

    def __init__(self, hidden: int, heads: int, ff: int) -> None:
        super().__init__()
        self.heads, self.dim = heads, hidden // heads
        self.qkv = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(3))
        self.proj, self.norm1 = nn.Linear(hidden, hidden), nn.LayerNorm(hidden, eps=1e-12)
        self.ff1, self.ff2, self.norm2 = (
            nn.Linear(hidden, ff),
            nn.Linear(ff, hidden),
            nn.LayerNorm(hidden, eps=1e-12),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        q, k, v = (lin(x).view(b, s, self.heads, self.dim).transpose(1, 2) for lin in self.qkv)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.dim)
        context = torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2).reshape(b, s, h)
        x = self.norm1(x + self.proj(context))
        return self.norm2(x + self.ff2(nn.functional.gelu(self.ff1(x))))


class Bert(nn.Module):
    """A BERT-base encoder written with torch.nn (used when ``transformers`` is not installed)."""

    def __init__(
        self, vocab: int = 30522, hidden: int = 768, layers: int = 12, heads: int = 12, seq: int = 128
    ) -> None:
        super().__init__()
        self.tokens, self.positions = nn.Embedding(vocab, hidden), nn.Embedding(seq, hidden)
        self.norm = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList(BertLayer(hidden, heads, 4 * hidden) for _ in range(layers))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(ids.shape[1]).unsqueeze(0)
        x = self.norm(self.tokens(ids) + self.positions(pos))
        for layer in self.layers:
            x = layer(x)
        return x


class HfBert(nn.Module):
    """``transformers``' BertModel from its default (BERT-base) config: the last hidden state."""

    def __init__(self) -> None:
        super().__init__()
        from transformers import BertConfig, BertModel

        self.bert = BertModel(BertConfig(attn_implementation="eager"), add_pooling_layer=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.bert(input_ids=ids).last_hidden_state


def _bert() -> nn.Module:
    try:
        return HfBert()
    except ImportError:
        return Bert()


def _vision(name: str) -> Callable[[], nn.Module]:
    def make() -> nn.Module:
        import torchvision

        if name == "r3d_18":
            return torchvision.models.video.r3d_18(weights=None)
        return getattr(torchvision.models, name)(weights=None)

    return make


@dataclass(frozen=True)
class ZooModel:
    """A model of the set: how to build it and its input (shape without the batch, dtype)."""

    name: str
    make: Callable[[], nn.Module]
    shape: tuple[int, ...]
    dtype: torch.dtype = torch.float32
    high: int = 0  # token ids: the vocabulary size

    def example(self, batch: int) -> torch.Tensor:
        """A random input of batch ``batch``."""
        if self.dtype == torch.int64:
            return torch.randint(0, self.high, (batch, *self.shape))
        return torch.randn(batch, *self.shape)


MODELS = {
    m.name: m
    for m in (
        ZooModel("resnet50", _vision("resnet50"), (3, 224, 224)),
        ZooModel("mobilenet_v2", _vision("mobilenet_v2"), (3, 224, 224)),
        ZooModel("r3d_18", _vision("r3d_18"), (3, 16, 112, 112)),
        ZooModel("dcgan_g", DcganGenerator, (100, 1, 1)),
        ZooModel("dcgan_d", DcganDiscriminator, (3, 64, 64)),
        ZooModel("bert", _bert, (128,), torch.int64, 30522),
        ZooModel("lstm_lm", LstmLm, (35,), torch.int64, 10000),
        ZooModel("dqn", Dqn, (4, 84, 84)),
    )
}


def export(model: ZooModel, batch: int, out: Path, dynamo: bool = False) -> Path:
    """Export ``model`` at ``batch`` to ``out/NAME_bBATCH[_dynamo].onnx`` (random weights, seed 0)."""
    torch.manual_seed(0)
    net = model.make().eval()
    path = out / f"{model.name}_b{batch}{'_dynamo' if dynamo else ''}.onnx"
    out.mkdir(parents=True, exist_ok=True)
    torch.backends.mha.set_fastpath_enabled(False)
    with torch.no_grad():
        torch.onnx.export(
            net,
            (model.example(batch),),
            str(path),
            input_names=["input"],
            output_names=["output"],
            opset_version=17,
            dynamo=dynamo,
        )
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=ZOO, help="where the .onnx files go")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 16])
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    p.add_argument(
        "--dynamo", action="store_true", help="also export with the dynamo exporter (needs onnxscript)"
    )
    args = p.parse_args(argv)
    for name in args.models:
        for batch in args.batches:
            print(export(MODELS[name], batch, args.out), flush=True)
            if args.dynamo:
                try:
                    print(export(MODELS[name], batch, args.out, dynamo=True), flush=True)
                except ImportError as e:
                    print(f"{name} b{batch}: dynamo exporter unavailable ({e})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
