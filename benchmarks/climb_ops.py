"""User-defined operators for bench_climb.py: written with placeholder / compute / reduce_axis only,
as a new user would (no built-in operator name, no hand-written schedule), registered as workloads
so that ``te.Task`` and the tuning log know them. Their references come from evaluating the tensor
expression (no numpy reference is registered).

Each function takes the expression module last (``te``, autosched by default): bench_metaschedule.py
passes an adapter that spells the same calls in TVM's te, so both tuners get the same computation
from the same lines."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import autosched as asc
from autosched.expr import Tensor

#: label -> (workload name, arguments)
CASES: dict[str, tuple[str, tuple[int, ...]]] = {
    "matmul_at": ("climb_matmul_at", (512, 512, 512)),
    "conv_nhwc": ("climb_conv_nhwc", (28, 128, 128, 3)),
    "attention": ("climb_attention", (16, 256, 256, 64)),
    "depthwise": ("climb_depthwise", (56, 128, 3)),
    "grouped": ("climb_grouped", (28, 128, 128, 4, 3)),
    "conv3d": ("climb_conv3d", (16, 28, 32, 32, 3)),
    "layernorm": ("climb_layernorm", (1024, 768)),
    "matmul_relu": ("climb_matmul_relu", (512, 512, 512)),
}


def matmul_at(m: int, n: int, k: int, te: Any = asc) -> list[Tensor]:
    """C = A^T B with A stored (k, m)."""
    a = te.placeholder((k, m), name="A")
    b = te.placeholder((k, n), name="B")
    r = te.reduce_axis(k, name="r")
    c = te.compute((m, n), lambda i, j: te.sum(a[r, i] * b[r, j], axis=r), name="C")
    return [a, b, c]


def conv_nhwc(hw: int, cin: int, cout: int, ks: int, te: Any = asc) -> list[Tensor]:
    """NHWC convolution (stride 1, 'same' padding) with an explicit padding stage."""
    pad = ks // 2
    x = te.placeholder((1, hw, hw, cin), name="X")
    w = te.placeholder((ks, ks, cin, cout), name="W")
    xp = te.compute(
        (1, hw + 2 * pad, hw + 2 * pad, cin),
        lambda n, h, v, c: te.if_then_else(
            te.all(h >= pad, h < hw + pad, v >= pad, v < hw + pad), x[n, h - pad, v - pad, c], 0.0),
        name="Xp")
    rh, rw, rc = (te.reduce_axis(e, name=n) for e, n in ((ks, "rh"), (ks, "rw"), (cin, "rc")))
    y = te.compute(
        (1, hw, hw, cout),
        lambda n, h, v, f: te.sum(xp[n, h + rh, v + rw, rc] * w[rh, rw, rc, f], axis=[rh, rw, rc]),
        name="Y")
    return [x, w, y]


def attention(b: int, m: int, n: int, d: int, te: Any = asc) -> list[Tensor]:
    """Batched attention scores S[b, i, j] = sum_d Q[b, i, d] K[b, j, d]."""
    q = te.placeholder((b, m, d), name="Q")
    k = te.placeholder((b, n, d), name="K")
    r = te.reduce_axis(d, name="r")
    s = te.compute((b, m, n), lambda z, i, j: te.sum(q[z, i, r] * k[z, j, r], axis=r), name="S")
    return [q, k, s]


def depthwise(hw: int, c: int, ks: int, te: Any = asc) -> list[Tensor]:
    """Depthwise NCHW convolution on a pre-padded input (stride 1)."""
    x = te.placeholder((1, c, hw + ks - 1, hw + ks - 1), name="X")
    w = te.placeholder((c, ks, ks), name="W")
    rh, rw = te.reduce_axis(ks, name="rh"), te.reduce_axis(ks, name="rw")
    y = te.compute((1, c, hw, hw),
                    lambda n, ch, h, v: te.sum(x[n, ch, h + rh, v + rw] * w[ch, rh, rw], axis=[rh, rw]),
                    name="Y")
    return [x, w, y]


def grouped(hw: int, cin: int, cout: int, groups: int, ks: int, te: Any = asc) -> list[Tensor]:
    """Grouped NCHW convolution on a pre-padded input (stride 1)."""
    per_in, per_out = cin // groups, cout // groups
    x = te.placeholder((1, cin, hw + ks - 1, hw + ks - 1), name="X")
    w = te.placeholder((cout, per_in, ks, ks), name="W")
    rc, rh, rw = (te.reduce_axis(e, name=n) for e, n in ((per_in, "rc"), (ks, "rh"), (ks, "rw")))
    y = te.compute(
        (1, cout, hw, hw),
        lambda n, f, h, v: te.sum(x[n, (f // per_out) * per_in + rc, h + rh, v + rw] * w[f, rc, rh, rw],
                                   axis=[rc, rh, rw]),
        name="Y")
    return [x, w, y]


def conv3d(d: int, hw: int, cin: int, cout: int, ks: int, te: Any = asc) -> list[Tensor]:
    """3-D NCDHW convolution on a pre-padded input (stride 1)."""
    e = ks - 1
    x = te.placeholder((1, cin, d + e, hw + e, hw + e), name="X")
    w = te.placeholder((cout, cin, ks, ks, ks), name="W")
    rc = te.reduce_axis(cin, name="rc")
    rd, rh, rw = (te.reduce_axis(ks, name=n) for n in ("rd", "rh", "rw"))
    y = te.compute(
        (1, cout, d, hw, hw),
        lambda n, f, z, h, v: te.sum(x[n, rc, z + rd, h + rh, v + rw] * w[f, rc, rd, rh, rw],
                                      axis=[rc, rd, rh, rw]),
        name="Y")
    return [x, w, y]


def layernorm(rows: int, cols: int, te: Any = asc) -> list[Tensor]:
    """LayerNorm over the last axis with a scale and a shift (two reductions, then elementwise)."""
    x = te.placeholder((rows, cols), name="X")
    g = te.placeholder((cols,), name="G")
    b = te.placeholder((cols,), name="Bt")
    r1, r2 = te.reduce_axis(cols, name="r1"), te.reduce_axis(cols, name="r2")
    mean = te.compute((rows,), lambda i: te.sum(x[i, r1] / cols, axis=r1), name="mean")
    var = te.compute((rows,), lambda i: te.sum((x[i, r2] - mean[i]) * (x[i, r2] - mean[i]) / cols, axis=r2),
                      name="var")
    y = te.compute((rows, cols), lambda i, j: (x[i, j] - mean[i]) / te.sqrt(var[i] + 1e-5) * g[j] + b[j],
                    name="Y")
    return [x, g, b, y]


def matmul_relu(m: int, n: int, k: int, te: Any = asc) -> list[Tensor]:
    """relu(A B + bias): a matmul with a bias-and-ReLU epilogue stage."""
    a = te.placeholder((m, k), name="A")
    b = te.placeholder((k, n), name="B")
    bias = te.placeholder((n,), name="bias")
    r = te.reduce_axis(k, name="r")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    y = te.compute((m, n), lambda i, j: te.max(c[i, j] + bias[j], 0.0), name="Y")
    return [a, b, bias, y]



#: workload name -> its function (called with another ``te`` by bench_metaschedule.py)
FUNCTIONS: dict[str, Callable[..., list[Any]]] = {
    "climb_matmul_at": matmul_at,
    "climb_conv_nhwc": conv_nhwc,
    "climb_attention": attention,
    "climb_depthwise": depthwise,
    "climb_grouped": grouped,
    "climb_conv3d": conv3d,
    "climb_layernorm": layernorm,
    "climb_matmul_relu": matmul_relu,
}


def _register(name: str, fn: Callable[..., list[Any]]) -> None:
    """Register ``fn`` as workload ``name``, its parameters without ``te`` (autosched's te used)."""
    def build(*args: int) -> list[Any]:
        return fn(*args)

    signature = inspect.signature(fn)
    build.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[p for p in signature.parameters.values() if p.name != "te"])
    build.__name__, build.__doc__ = fn.__name__, fn.__doc__
    asc.workload(name)(build)


for _name, _fn in FUNCTIONS.items():
    _register(_name, _fn)
