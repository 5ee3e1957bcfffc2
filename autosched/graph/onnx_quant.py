"""ONNX converters of QuantizeLinear and DequantizeLinear (QDQ models, as onnxruntime's
``quantize_static`` writes them) with a scale per tensor.

The graph computes in one float type: a quantized value is its integers as whole numbers in it,
and a QuantizeLinear / DequantizeLinear pair rounds an activation to the integer grid and back
(the computation of the quantized model, in float). Both are elementwise steps that fuse into the
producing kernel's epilogue. Weights quantized per channel are constants: their DequantizeLinear is
computed at import.
"""

from __future__ import annotations

import numpy as np

from .ir import GraphError
from .onnx_context import Importer
from .onnx_rewrite import OnnxNode
from .onnx_table import Result, converter

#: integer types of quantized values -> their range
RANGES = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535), "int16": (-32768, 32767)}


def _per_tensor(cx: Importer, n: OnnxNode) -> tuple[float, float, str]:
    """(scale, zero point, the quantized type) of node ``n``: constants of one element each."""
    scale = cx.const(n, 1, "scale")
    zero = cx.optional_const(n, 2, "zero point")
    if scale.size != 1 or (zero is not None and zero.size != 1):
        raise GraphError("a scale and zero point per axis of a computed value are not supported (per tensor)")
    kind = zero.dtype.name if zero is not None else "uint8"
    if kind not in RANGES:
        raise GraphError(f"quantized type {kind} is not one of {', '.join(RANGES)}")
    s = float(scale.reshape(()))
    if not np.isfinite(s) or s == 0.0:
        raise GraphError(f"the scale must be a finite non-zero number, got {s}")
    return s, float(zero.reshape(())) if zero is not None else 0.0, kind


@converter("QuantizeLinear", attrs=("axis", "saturate"),
           doc="of a computed value, scale and zero point per tensor (to uint8, int8, uint16, int16); "
               "of constants: computed at import")
def _quantize(cx: Importer, n: OnnxNode) -> list[Result]:
    scale, zero, kind = _per_tensor(cx, n)
    low, high = RANGES[kind]
    return [cx.b.quantize(cx.value(n.inputs[0]), scale, zero, low, high, name=n.name)]


@converter("DequantizeLinear", attrs=("axis",),
           doc="of a computed value, scale and zero point per tensor; of constants (weights per "
               "channel): computed at import")
def _dequantize(cx: Importer, n: OnnxNode) -> list[Result]:
    scale, zero, _ = _per_tensor(cx, n)
    return [cx.b.dequantize(cx.value(n.inputs[0]), scale, zero, name=n.name)]
