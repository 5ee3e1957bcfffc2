"""List the knob templates and the sizes of their spaces for the reference workloads.

python -m autosched.space.templates [--target "c -num-threads=1"]
"""

from __future__ import annotations

import argparse

from ...ops import Workload, get_workload
from ...target import Target
from .registry import list_templates, template_space

RESNET18 = [
    (3, 224, 224, 64, 7, 2, 3),
    (64, 56, 56, 64, 3, 1, 1),
    (64, 56, 56, 128, 1, 2, 0),
    (64, 56, 56, 128, 3, 2, 1),
    (128, 28, 28, 128, 3, 1, 1),
    (128, 28, 28, 256, 1, 2, 0),
    (128, 28, 28, 256, 3, 2, 1),
    (256, 14, 14, 256, 3, 1, 1),
    (256, 14, 14, 512, 1, 2, 0),
    (256, 14, 14, 512, 3, 2, 1),
    (512, 7, 7, 512, 3, 1, 1),
]
"""ResNet-18 conv2d layers (C, H, W, K, R, stride, pad), batch 1, from the AutoTVM paper's set."""


def reference_workloads() -> list[Workload]:
    """The DESIGN note's reference workloads, for every operator that has a template."""
    out = [get_workload("matmul", (n, n, n)) for n in (256, 512, 1024)]
    out += [get_workload("matmul", (127, 255, 63)), get_workload("matmul", (1, 4096, 1024))]
    out.append(get_workload("matmul", (1024, 1024, 1024, "float32", True)))
    out.append(get_workload("batch_matmul", (16, 128, 128, 64)))
    out += [get_workload("dense", (1, 4096, 1024)), get_workload("dense", (128, 1024, 1024))]
    for c, h, w, k, r, stride, pad in RESNET18:
        out.append(get_workload("conv2d_nchw", (1, c, h, w, k, r, r, stride, pad)))
        out.append(get_workload("conv2d_nhwc", (1, h, w, c, k, r, r, stride, pad)))
    out.append(get_workload("depthwise_conv2d_nchw", (1, 32, 112, 112, 3, 3, 1, 1)))
    out.append(get_workload("depthwise_conv2d_nchw", (1, 512, 14, 14, 3, 3, 1, 1)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--target", default="c -num-threads=1", help="target string (default: %(default)s)")
    args = ap.parse_args(argv)
    target = Target.parse(args.target)
    print(f"templates (target {target}):")
    for t in list_templates():
        print(f"  {t.workload:24s} {t.target_kind:6s} {t.doc}")
    print()
    for wl in reference_workloads():
        space = template_space(wl, target)
        knobs = ", ".join(f"{name} {size}" for name, size in space.knobs.items())
        print(f"{wl!s:56s} {len(space):>14,d}  {knobs}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
