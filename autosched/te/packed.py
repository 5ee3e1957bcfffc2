"""``register_func``: Python functions that an extern stage calls with ``call_packed``, as TVM's
packed-function registry (``@tvm.register_func("tvm.contrib.my_addone")``).

A ``call_packed(name, buf, ..., 3.0)`` of a registered name becomes a call of a small C function
compiled into the kernel (a *call site*), which hands the buffers' pointers to one process-wide
hook; :mod:`autosched.runner.packed` points the hook of every kernel ``asc.build`` loads at a
cffi callback that wraps the pointers as numpy arrays of the buffers' shapes (writes go to the
kernel's memory) and calls the function registered under ``name`` at that moment, with the
constants after them. It runs only where the function is registered: in the process that
called ``asc.build``. A kernel whose hook is not set (a tuning worker, an exported library)
stops with a message naming the function.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .buffer import DeclBuffer, ExternCall, call_extern

FUNCS: dict[str, Callable[..., Any]] = {}
"""The registered functions by name."""


@dataclass(frozen=True, slots=True)
class Site:
    """One ``call_packed`` of a registered function: its buffers (in the order of the pointers the
    C passes) and constant arguments (passed after them)."""

    name: str
    buffers: tuple[tuple[tuple[int, ...], str], ...]  # (shape, dtype) of each
    constants: tuple[int | float | bool | str, ...]


SITES: dict[int, Site] = {}
"""Every call site made in this process, by the number its C passes to the hook."""

PACKED_PREFIX = "asc_packed_"
"""How the C functions of call sites begin (a kernel calling one needs its hook set)."""

HOOK_SETTER = "asc_set_packed_hook"
"""The C function of a kernel with call sites that sets its hook (the runner calls it)."""

_PRELUDE = f"""typedef void (*asc_packed_hook_t)(int, void **);
static asc_packed_hook_t asc_packed_hook;
void {HOOK_SETTER}(asc_packed_hook_t hook);
void {HOOK_SETTER}(asc_packed_hook_t hook) {{ asc_packed_hook = hook; }}"""


def register_func(
    func_name: str | Callable[..., Any], f: Callable[..., Any] | None = None, override: bool = False
) -> Any:
    """Register ``f`` under ``func_name`` (TVM's ``register_func``; as a decorator too, with or
    without a name: the function's own name then). It receives the buffers as numpy arrays and
    the constants of the ``call_packed``; re-registering a name needs ``override=True``."""
    if callable(func_name):
        return register_func(func_name.__name__, func_name, override)
    if not isinstance(func_name, str) or not func_name:
        raise ValueError(f"register_func: the name must be a non-empty string, got {func_name!r}")

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(fn):
            raise TypeError(f"register_func {func_name!r}: expected a function, got {type(fn).__name__}")
        if func_name in FUNCS and not override:
            raise ValueError(
                f"register_func: {func_name!r} is already registered (override=True replaces it)"
            )
        FUNCS[func_name] = fn
        return fn

    return register if f is None else register(f)


def packed_site(name: str, args: Sequence[Any]) -> ExternCall:
    """The call of the C call site for ``call_packed(name, *args)`` of a registered function:
    buffers first (fixed shapes), then constants (numbers or strings)."""
    n_buf = next((k for k, a in enumerate(args) if not isinstance(a, DeclBuffer)), len(args))
    buffers, constants = list(args[:n_buf]), list(args[n_buf:])
    shapes: list[tuple[tuple[int, ...], str]] = []
    for b in buffers:
        if not all(isinstance(d, int) for d in b.shape):
            raise ValueError(
                f"call_packed {name!r}: buffer {b.name} has a symbolic shape; Python callbacks take "
                "fixed shapes"
            )
        shapes.append((tuple(int(d) for d in b.shape), b.dtype))
    for c in constants:
        if not isinstance(c, (int, float, bool, str)):
            raise TypeError(
                f"call_packed {name!r}: give the buffers first, then constants (numbers, strings); got {c!r}"
            )
    site = Site(name, tuple(shapes), tuple(constants))
    number = zlib.crc32(repr(site).encode()) & 0x7FFFFFFF
    SITES[number] = site
    params = ", ".join(f"void *a{k}" for k in range(len(buffers))) or "void"
    pointers = ", ".join(f"a{k}" for k in range(len(buffers))) or "0"
    label = re.sub(r"[^A-Za-z0-9_.:-]", "_", name)  # the name in a C string: plain characters only
    shim = f"""static void {PACKED_PREFIX}{number}({params}) {{
  void *args[] = {{{pointers}}};
  if (!asc_packed_hook) {{
    fputs("autosched: call_packed \\"{label}\\" runs a Python function: "
          "only in the process that registered it\\n", stderr);
    abort();
  }}
  asc_packed_hook({number}, args);
}}"""
    return call_extern(
        "void",
        f"{PACKED_PREFIX}{number}",
        *(b.data for b in buffers),
        c_source=[_PRELUDE, shim],
        headers=["stdio.h", "stdlib.h"],
    )
