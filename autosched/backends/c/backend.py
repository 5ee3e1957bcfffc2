"""The ``c`` backend: gcc/clang, cffi, the isolated local runner."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ...emit_c import emit_c, function_name
from ...expr import PACKED_PREFIX
from ...lower.ir import PrimFunc
from ...runner.builder import LocalBuilder
from ...runner.compile import compile_shared
from ...runner.kernel import ArgSpec, Kernel, ScalarArg
from ...runner.load import load_kernel
from ...runner.local_runner import LocalRunner
from ...runner.measure import Builder, MeasureOption, Runner
from ...runner.packed import install_hook
from ...runner.system_libs import check_system_libraries
from ...target import Target
from ..base import Backend, register_backend
from .target_kind import CKind


@register_backend
class CBackend(Backend):
    """C through gcc/clang, loaded with cffi; measured by the isolated local runner."""

    kind = "c"
    target_kind = CKind

    def source(
        self, func: PrimFunc, target: Target, portable: bool = False, timing: bool | None = None
    ) -> str:
        """C source with the timing harness (see :func:`~autosched.emit_c.emit_c`)."""
        return emit_c(
            func,
            num_threads=target.num_threads or 1,
            vector_bytes=target.vector_bytes or 16,
            portable=portable,
            timing=timing,
        )

    def build(
        self,
        func: PrimFunc,
        target: Target,
        specs: Sequence[ArgSpec],
        sizes: Sequence[str] = (),
        cache_dir: Path | None = None,
        scalars: Sequence[ScalarArg] = (),
    ) -> Kernel:
        """Compile to a shared library (cached by content, linked with the user C ``func.code`` it
        calls) and load it with cffi; ``scalars`` are its scalar arguments at their call places."""
        check_system_libraries(func.code, target)  # a missing OpenBLAS: one line, not a compiler log
        lib = compile_shared(self.source(func, target), target, cache_dir=cache_dir, code=func.code)
        kernel = load_kernel(lib, function_name(func.name), specs, sizes, scalars)
        if any(s.startswith(PACKED_PREFIX) for s in func.code.symbols):
            install_hook(lib)  # call_packed of a Python function: its hook calls back here
        return kernel

    def builder(self, option: MeasureOption) -> Builder:
        """:class:`~autosched.runner.LocalBuilder` with the option's parallelism and timeout."""
        return LocalBuilder(n_parallel=option.n_parallel, timeout=option.build_timeout)

    def runner(self, option: MeasureOption) -> Runner:
        """:class:`~autosched.runner.LocalRunner` (an isolated worker process)."""
        return LocalRunner(option)

