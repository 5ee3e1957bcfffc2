"""One small workload of every built-in operator, shapes that divide nothing evenly: the cases the
embedded export is checked on under an emulated Cortex-M board."""

from __future__ import annotations

from typing import Any

#: (workload name, args) per built-in operator (matmul_lowp, AVX-512/AMX intrinsics only, is the
#: embedded export's refusal case: see test_embedded_export.py)
EMBEDDED_CASES: list[tuple[str, tuple[Any, ...]]] = [
    ("add", (5, 7)),
    ("avg_pool2d", (1, 2, 9, 10, 3, 2, 1)),
    ("batch_matmul", (3, 5, 7, 4)),
    ("broadcast_to", ("1x3x1x5", "2x3x4x5")),
    ("conv2d_nchw", (1, 3, 9, 11, 4, 3, 3, 2, 1, 2)),
    ("conv2d_nhwc", (1, 9, 11, 3, 4, 3, 3, 2, 1, 2)),
    ("dense", (5, 7, 9)),
    ("depthwise_conv2d_nchw", (2, 3, 9, 11, 3, 3, 2, 1, 2)),
    ("fused_batch_matmul", (2, 3, 4, 5, "add")),
    ("fused_conv", ("2x3x13", "3x3x5x4", "2", "2,1", "2", 1, "bias")),
    ("fused_conv2d", (1, 6, 9, 9, 8, 3, 3, 1, 1, 1, "bias,relu")),
    ("fused_conv2d_packed", (1, 3, 5, 5, 16, 3, 3, 1, 1, 8, "")),
    ("fused_conv_transpose", ("1x6x3x5", "2x6x4x4x8", "2,2", "1,1,1,1", "0,0", "1,1", 1, "bias,relu")),
    ("fused_dense", (3, 5, 7, "bias,gelu")),
    ("fused_dense_packed", (2, 40, 13, 16, "add")),
    ("fused_elementwise", (3, 5, 7, "bias,gelu")),
    ("gather", (2, 7, 5, 6)),
    ("global_avg_pool2d", (1, 3, 7, 9)),
    ("instance_norm", (2, 3, 17, 1e-5)),
    ("layer_norm", (3, 5, 1e-5)),
    ("lstm_hidden", (3, 37)),
    ("lstm_state", (3, 37, False)),
    ("matmul", (7, 9, 5)),
    ("matmul", (4, 3, 11, "int32")),
    ("max_pool2d", (1, 2, 9, 9, 3, 2, 1)),
    ("pad", ("1x2x3x4", "0,1,2,0,0,0,1,3", 0.0, "reflect")),
    ("pool", ("1x3x9x10", "avg", "3,2", "2,1", "1,0,1,1", "1,1", True, False)),
    ("reduce", ("5x7x3", "1", "mean")),
    ("relu", (5, 7)),
    ("resize", ("1x2x5x6", "1x2x7x3", "linear", "align_corners", "round_prefer_floor")),
    ("slice", ("4x9x10", "1,0,3", "4,9,10", "2,3,1")),
    ("softmax", (5, 7)),
    ("softmax_axis", (2, 7, 3)),
    ("transpose", ("2x3x4x5", "0,2,3,1")),
]
