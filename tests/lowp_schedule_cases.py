"""Schedule recipes of the low-precision matmul workload (``matmul_lowp``) for the shared schedule
cases (``schedule_cases``): plain loop nests, and the portable C path of its dot-product intrinsic
(which runs on any CPU and compiles in any C build)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import autosched as asc
from autosched.intrin.dot import KINDS, dot_intrin

Apply = Callable[[asc.Schedule, asc.Workload], None]

# (M, N, K, kind): N divides by 16 and K by the kind's k group (the packed layout's rule)
LOWP_SHAPES: dict[str, list[tuple[str, tuple[Any, ...]]]] = {
    "matmul_lowp": [
        ("even", (32, 32, 64, "vnni")),
        ("odd", (13, 48, 68, "vnni")),
        ("bf16", (9, 32, 34, "bf16")),
        ("sdot", (11, 16, 36, "sdot")),
        ("udot", (8, 32, 40, "udot")),
    ],
}


def _axes(s: asc.Schedule, wl: asc.Workload) -> tuple[Any, ...]:
    (C,) = wl.outputs
    return (C, *s[C].op.axis, *s[C].op.reduce_axis)


def _naive(s: asc.Schedule, wl: asc.Workload) -> None:
    """No steps."""


def _tile(s: asc.Schedule, wl: asc.Workload) -> None:
    C, i, j, ko, ki = _axes(s, wl)
    io, jo, ii, ji = s[C].tile(i, j, 4, 16)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    s[C].vectorize(ji)


def _unroll_k(s: asc.Schedule, wl: asc.Workload) -> None:
    C, i, j, ko, ki = _axes(s, wl)
    s[C].reorder(i, ko, j, ki)
    s[C].unroll(ki)
    s[C].parallel(i)


def _tensorize(mr: int, kc: int) -> Apply:
    def apply(s: asc.Schedule, wl: asc.Workload) -> None:
        C, i, j, ko, ki = _axes(s, wl)
        kind = wl.args[3]
        io, ii = s[C].split(i, mr)
        jo, ji = s[C].split(j, 16)
        koo, koi = s[C].split(ko, kc // KINDS[kind].group)
        s[C].reorder(io, koo, jo, ii, ji, koi, ki)
        s[C].tensorize(ii, dot_intrin(kind, mr, kc, portable=True))

    return apply


LOWP_RECIPES: list[tuple[str, str, Apply]] = [
    ("matmul_lowp", name, fn)
    for name, fn in (
        ("naive", _naive),
        ("tile", _tile),
        ("unroll_k", _unroll_k),
        ("tensorize_8x16", _tensorize(8, 16)),
        ("tensorize_4x32", _tensorize(4, 32)),
    )
]
