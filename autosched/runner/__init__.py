"""autosched.runner: build C kernels (compile, cache by content) and load them as numpy callables."""

from .compile import (
    BuildError,
    BuildTimeout,
    CompileError,
    CompilerNotFound,
    compile_object,
    compile_shared,
    default_cache_dir,
)
from .kernel import ArgSpec, Kernel
from .load import LoadError, elf_machine, load_kernel

__all__ = [
    "ArgSpec",
    "BuildError",
    "BuildTimeout",
    "CompileError",
    "CompilerNotFound",
    "Kernel",
    "LoadError",
    "compile_object",
    "compile_shared",
    "default_cache_dir",
    "elf_machine",
    "load_kernel",
]
