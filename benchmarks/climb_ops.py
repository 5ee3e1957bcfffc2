"""User-defined operators for bench_climb.py: written with placeholder / compute / reduce_axis only,
as a new user would (no built-in operator name, no hand-written schedule), registered as workloads
so that ``asc.Task`` and the tuning log know them. Their references come from evaluating the tensor
expression (no numpy reference is registered)."""

from __future__ import annotations

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


@asc.workload("climb_matmul_at")
def matmul_at(m: int, n: int, k: int) -> list[Tensor]:
    """C = A^T B with A stored (k, m)."""
    a = asc.placeholder((k, m), name="A")
    b = asc.placeholder((k, n), name="B")
    r = asc.reduce_axis(k, name="r")
    c = asc.compute((m, n), lambda i, j: asc.sum(a[r, i] * b[r, j], axis=r), name="C")
    return [a, b, c]


@asc.workload("climb_conv_nhwc")
def conv_nhwc(hw: int, cin: int, cout: int, ks: int) -> list[Tensor]:
    """NHWC convolution (stride 1, 'same' padding) with an explicit padding stage."""
    pad = ks // 2
    x = asc.placeholder((1, hw, hw, cin), name="X")
    w = asc.placeholder((ks, ks, cin, cout), name="W")
    xp = asc.compute(
        (1, hw + 2 * pad, hw + 2 * pad, cin),
        lambda n, h, v, c: asc.if_then_else(
            asc.all(h >= pad, h < hw + pad, v >= pad, v < hw + pad), x[n, h - pad, v - pad, c], 0.0),
        name="Xp")
    rh, rw, rc = (asc.reduce_axis(e, name=n) for e, n in ((ks, "rh"), (ks, "rw"), (cin, "rc")))
    y = asc.compute(
        (1, hw, hw, cout),
        lambda n, h, v, f: asc.sum(xp[n, h + rh, v + rw, rc] * w[rh, rw, rc, f], axis=[rh, rw, rc]),
        name="Y")
    return [x, w, y]


@asc.workload("climb_attention")
def attention(b: int, m: int, n: int, d: int) -> list[Tensor]:
    """Batched attention scores S[b, i, j] = sum_d Q[b, i, d] K[b, j, d]."""
    q = asc.placeholder((b, m, d), name="Q")
    k = asc.placeholder((b, n, d), name="K")
    r = asc.reduce_axis(d, name="r")
    s = asc.compute((b, m, n), lambda z, i, j: asc.sum(q[z, i, r] * k[z, j, r], axis=r), name="S")
    return [q, k, s]


@asc.workload("climb_depthwise")
def depthwise(hw: int, c: int, ks: int) -> list[Tensor]:
    """Depthwise NCHW convolution on a pre-padded input (stride 1)."""
    x = asc.placeholder((1, c, hw + ks - 1, hw + ks - 1), name="X")
    w = asc.placeholder((c, ks, ks), name="W")
    rh, rw = asc.reduce_axis(ks, name="rh"), asc.reduce_axis(ks, name="rw")
    y = asc.compute((1, c, hw, hw),
                    lambda n, ch, h, v: asc.sum(x[n, ch, h + rh, v + rw] * w[ch, rh, rw], axis=[rh, rw]),
                    name="Y")
    return [x, w, y]


@asc.workload("climb_grouped")
def grouped(hw: int, cin: int, cout: int, groups: int, ks: int) -> list[Tensor]:
    """Grouped NCHW convolution on a pre-padded input (stride 1)."""
    per_in, per_out = cin // groups, cout // groups
    x = asc.placeholder((1, cin, hw + ks - 1, hw + ks - 1), name="X")
    w = asc.placeholder((cout, per_in, ks, ks), name="W")
    rc, rh, rw = (asc.reduce_axis(e, name=n) for e, n in ((per_in, "rc"), (ks, "rh"), (ks, "rw")))
    y = asc.compute(
        (1, cout, hw, hw),
        lambda n, f, h, v: asc.sum(x[n, (f // per_out) * per_in + rc, h + rh, v + rw] * w[f, rc, rh, rw],
                                   axis=[rc, rh, rw]),
        name="Y")
    return [x, w, y]


@asc.workload("climb_conv3d")
def conv3d(d: int, hw: int, cin: int, cout: int, ks: int) -> list[Tensor]:
    """3-D NCDHW convolution on a pre-padded input (stride 1)."""
    e = ks - 1
    x = asc.placeholder((1, cin, d + e, hw + e, hw + e), name="X")
    w = asc.placeholder((cout, cin, ks, ks, ks), name="W")
    rc = asc.reduce_axis(cin, name="rc")
    rd, rh, rw = (asc.reduce_axis(ks, name=n) for n in ("rd", "rh", "rw"))
    y = asc.compute(
        (1, cout, d, hw, hw),
        lambda n, f, z, h, v: asc.sum(x[n, rc, z + rd, h + rh, v + rw] * w[f, rc, rd, rh, rw],
                                      axis=[rc, rd, rh, rw]),
        name="Y")
    return [x, w, y]


@asc.workload("climb_layernorm")
def layernorm(rows: int, cols: int) -> list[Tensor]:
    """LayerNorm over the last axis with a scale and a shift (two reductions, then elementwise)."""
    x = asc.placeholder((rows, cols), name="X")
    g = asc.placeholder((cols,), name="G")
    b = asc.placeholder((cols,), name="Bt")
    r1, r2 = asc.reduce_axis(cols, name="r1"), asc.reduce_axis(cols, name="r2")
    mean = asc.compute((rows,), lambda i: asc.sum(x[i, r1] / cols, axis=r1), name="mean")
    var = asc.compute((rows,), lambda i: asc.sum((x[i, r2] - mean[i]) * (x[i, r2] - mean[i]) / cols, axis=r2),
                      name="var")
    y = asc.compute((rows, cols), lambda i, j: (x[i, j] - mean[i]) / asc.sqrt(var[i] + 1e-5) * g[j] + b[j],
                    name="Y")
    return [x, g, b, y]


@asc.workload("climb_matmul_relu")
def matmul_relu(m: int, n: int, k: int) -> list[Tensor]:
    """relu(A B + bias): a matmul with a bias-and-ReLU epilogue stage."""
    a = asc.placeholder((m, k), name="A")
    b = asc.placeholder((k, n), name="B")
    bias = asc.placeholder((n,), name="bias")
    r = asc.reduce_axis(k, name="r")
    c = asc.compute((m, n), lambda i, j: asc.sum(a[i, r] * b[r, j], axis=r), name="C")
    y = asc.compute((m, n), lambda i, j: asc.max(c[i, j] + bias[j], 0.0), name="Y")
    return [a, b, bias, y]
