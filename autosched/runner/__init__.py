"""autosched.runner: build C kernels (compile, cache by content), load them as numpy callables, and
measure candidates (LocalBuilder compiles a batch in parallel, LocalRunner checks and times it in an
isolated worker process)."""

from .builder import LocalBuilder
from .compile import (
    BuildError,
    BuildTimeout,
    CompileError,
    CompilerNotFound,
    compile_object,
    compile_shared,
    default_cache_dir,
)
from .kernel import ArgSpec, Kernel, ScalarArg, flush_bytes
from .load import LoadError, elf_machine, load_kernel
from .local_runner import LocalRunner, measure_batch
from .measure import (
    Builder,
    BuildResult,
    MeasureErrorNo,
    MeasureInput,
    MeasureOption,
    MeasureResult,
    Runner,
)

__all__ = [
    "ArgSpec",
    "BuildError",
    "BuildResult",
    "BuildTimeout",
    "Builder",
    "CompileError",
    "CompilerNotFound",
    "Kernel",
    "ScalarArg",
    "LoadError",
    "LocalBuilder",
    "LocalRunner",
    "MeasureErrorNo",
    "MeasureInput",
    "MeasureOption",
    "MeasureResult",
    "Runner",
    "compile_object",
    "compile_shared",
    "default_cache_dir",
    "elf_machine",
    "flush_bytes",
    "load_kernel",
    "measure_batch",
]
