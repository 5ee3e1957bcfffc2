"""The library's intrinsics declared from their names, as recorded in tensorize steps: a tuning
record of a kernel using one replays in a process that has not built that kernel's schedule (a
fresh ``load_best``, a measurement worker, the database). Names come from logs, so each is read
by a strict pattern and its numbers checked by the intrinsic's own constructor; anything else is
not the library's (``None``)."""

from __future__ import annotations

import re
from collections.abc import Callable

from ..te.intrin import TensorIntrin
from .amx import amx_intrin
from .dot import LANES, dot_intrin
from .dot_avx2 import avx2_dot_intrin
from .gemm import gemm_ukernel

_NUM = r"([1-9][0-9]{0,4})"
PATTERNS: list[tuple[re.Pattern[str], Callable[..., TensorIntrin]]] = [
    (re.compile(rf"dot_(vnni|bf16|sdot|udot)_{_NUM}x{_NUM}(?:_n(32))?(_portable)?"),
     lambda kind, mr, kc, cols, portable:
         dot_intrin(kind, int(mr), int(kc), bool(portable), int(cols or LANES))),
    (re.compile(rf"dot_avx2_(?:(sdot|udot)_)?{_NUM}x{_NUM}"),
     lambda kind, mr, kc: avx2_dot_intrin(int(mr), int(kc), kind or "vnni")),
    (re.compile(rf"amx_(vnni|bf16)_{_NUM}x{_NUM}"), lambda kind, mr, kc: amx_intrin(kind, int(mr), int(kc))),
    (re.compile(rf"gemm_ukernel_{_NUM}x{_NUM}x{_NUM}_(float32|float64)_(auto|portable|avx2|avx512|neon)"),
     lambda mr, nr, kc, dtype, isa: gemm_ukernel(int(mr), int(nr), int(kc), dtype, isa)),
]  # fmt: skip


def library_intrin(name: str) -> TensorIntrin | None:
    """The library intrinsic called ``name``, declared now; ``None`` if no pattern reads the name
    or its numbers are out of the intrinsic's range."""
    for pattern, make in PATTERNS:
        found = pattern.fullmatch(name)
        if found:
            try:
                return make(*found.groups())
            except ValueError:
                return None
    return None
