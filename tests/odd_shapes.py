"""Small shapes of the built-in operators, most of them dividing no tile size: the workloads whose
random programs the sketch-space tests build and check (CPU and GPU)."""

from __future__ import annotations

ODD_SHAPES: list[tuple[str, tuple[object, ...]]] = [
    ("matmul", (37, 29, 23)),
    ("matmul", (16, 24, 8, "float32", True)),
    ("batch_matmul", (2, 9, 13, 7)),
    ("dense", (5, 19, 11)),
    ("conv2d_nchw", (1, 5, 9, 11, 6, 3, 3, 2, 1)),
    ("conv2d_nhwc", (1, 9, 7, 5, 6, 3, 3, 1, 1)),
    ("depthwise_conv2d_nchw", (1, 7, 10, 10, 3, 3, 1, 1)),
    ("max_pool2d", (1, 3, 9, 9, 3, 2, 1)),
    ("avg_pool2d", (1, 3, 9, 9, 3, 2, 1)),
]
