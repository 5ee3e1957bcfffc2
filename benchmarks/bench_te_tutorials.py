"""How much of TVM's te tutorials runs unchanged with ``te.`` replaced by ``asc.`` (issue 14).

The tutorials (schedule primitives, reduction, tuple inputs, intrinsic math, scan, extern ops,
tensorize, GEMM optimization on the CPU, the getting-started guide) are ported statement by
statement in `te_tutorials_a.py` / `te_tutorials_b.py` with one mechanical renaming:

- ``te.X``, ``tvm.te.X``, ``tvm.tir.X`` and ``tvm.X`` (``lower``, ``build``, ``register_func``)
  become ``asc.X``; ``from tvm.contrib import cblas`` becomes ``from autosched.contrib import
  cblas``; the target ``"llvm"`` becomes ``"c"``.
- Statements of TVM's runtime (device arrays ``tvm.nd.array``, ``.numpy()``, ``tvm.testing``,
  ``time_evaluator``, ``imported_modules[0].get_source()``, module save/load) are written with
  numpy and the built kernel instead and marked ``# runtime``; statements that need a GPU device
  are marked ``# gpu``. Neither is counted. The getting-started guide's matrix multiplication is
  GEMM optimization's, counted once; its module save/load part is not ported (`autosched export`
  is the counterpart).

Each top-level statement runs in one namespace, in order, whatever happened before it (a
failure can make later statements fail too: the report lists each failing statement with its
error). ``print`` formats its arguments (so printing the lowered IR is exercised) and discards
the text. Usage: ``python benchmarks/bench_te_tutorials.py [--json OUT] [--verbose]``.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import te_tutorials_a as part_a  # noqa: E402
import te_tutorials_b as part_b  # noqa: E402

import autosched as asc  # noqa: E402

TUTORIALS: dict[str, str] = {
    "schedule_primitives": part_a.SCHEDULE_PRIMITIVES,
    "reduction": part_a.REDUCTION,
    "tuple_inputs": part_a.TUPLE_INPUTS,
    "intrin_math": part_a.INTRIN_MATH,
    "scan": part_a.SCAN,
    "extern_op": part_b.EXTERN_OP,
    "tensorize": part_b.TENSORIZE,
    "opt_gemm": part_b.OPT_GEMM,
    "get_started": part_b.GET_STARTED,
}

#: the C of the tensorize tutorial's ``gemv_update`` / ``gemv_reset`` (TVM compiles it to LLVM
#: IR with clang and imports it with a pragma; a C target takes C)
GEMV_C_UPDATE = """
static int gemv_update(float *cc, const float *aa, const float *bb, int m, int l, int stride) {
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < l; ++j) cc[i] += aa[j] * bb[i * stride + j];
  return 0;
}
"""
GEMV_C_RESET = """
static int gemv_reset(float *cc, int m) {
  for (int i = 0; i < m; ++i) cc[i] = 0.0f;
  return 0;
}
"""


@dataclass
class Outcome:
    """What one tutorial's statements did."""

    counted: int = 0
    passed: int = 0
    uncounted: int = 0
    failures: list[tuple[int, str, str]] = field(default_factory=list)


def _quiet_print(*args: Any, **_: Any) -> None:
    """``print`` for the ports: format every argument (that is what printing IR exercises)."""
    for a in args:
        str(a)


def _namespace() -> dict[str, Any]:
    return {
        "__name__": "tutorial",
        "asc": asc,
        "np": np,
        "print": _quiet_print,
        "get_const_tuple": lambda shape: tuple(int(d) for d in shape),
        "GEMV_C_UPDATE": GEMV_C_UPDATE,
        "GEMV_C_RESET": GEMV_C_RESET,
    }


def _marker(lines: list[str], node: ast.stmt) -> str:
    first = lines[node.lineno - 1]
    for mark in ("# runtime", "# gpu"):
        if first.rstrip().endswith(mark):
            return mark[2:]
    return ""


def run_tutorial(name: str, source: str, verbose: bool = False) -> Outcome:
    """Run ``source`` statement by statement; count the unmarked ones that raise nothing."""
    lines = source.splitlines()
    ns = _namespace()
    out = Outcome()
    for node in ast.parse(source).body:
        mark = _marker(lines, node)
        code = compile(ast.Module(body=[node], type_ignores=[]), f"<{name}>", "exec")
        try:
            exec(code, ns)
            ok, err = True, ""
        except Exception as exc:  # noqa: BLE001 - every failure is reported, none stops the run
            ok, err = False, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        if mark:
            out.uncounted += 1
        else:
            out.counted += 1
            out.passed += ok
        if not ok:
            text = lines[node.lineno - 1].strip()
            out.failures.append((node.lineno, f"{text}{'  [' + mark + ']' if mark else ''}", err))
        if verbose:
            print(f"{name}:{node.lineno}: {'ok ' if ok else 'ERR'} {lines[node.lineno - 1].strip()}")
    return out


def main(argv: list[str] | None = None) -> int:
    """Run every port and print the share of te statements that ran unchanged."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, help="write the per-tutorial counts and failures here")
    ap.add_argument("--verbose", action="store_true", help="print every statement's outcome")
    opts = ap.parse_args(argv)
    report: dict[str, Any] = {}
    total = passed = 0
    for name, source in TUTORIALS.items():
        t0 = time.perf_counter()
        out = run_tutorial(name, source, opts.verbose)
        total, passed = total + out.counted, passed + out.passed
        print(f"{name:20s} {out.passed:3d} / {out.counted:3d} te statements ran unchanged "
              f"({out.uncounted} runtime/gpu statements not counted; {time.perf_counter() - t0:.1f} s)")
        for line, text, err in out.failures:
            print(f"    line {line:3d}: {text[:70]}\n              -> {err[:160]}")
        report[name] = {"counted": out.counted, "passed": out.passed, "uncounted": out.uncounted,
                        "failures": [{"line": ln, "statement": t, "error": e}
                                     for ln, t, e in out.failures]}
    print(f"TOTAL {passed} / {total} = {100.0 * passed / total:.1f}% of te statements ran unchanged")
    if opts.json:
        report["total"] = {"counted": total, "passed": passed}
        opts.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
