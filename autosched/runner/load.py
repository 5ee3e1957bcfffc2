"""Load a compiled kernel library with cffi (ABI mode: no C compiler needed at load time)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import cffi

from ..dtypes import dtype as dtype_info
from ..emit_c import EXTENSIONS_SYMBOL
from ..hardware import host_arch
from ..intrin.isa import check_extensions
from .cache_trust import CacheUntrusted, State, check_folder, is_cache_entry, verify
from .kernel import ArgSpec, Kernel, ScalarArg


class LoadError(RuntimeError):
    """A kernel library that cannot be loaded here (missing, for another machine, or lacking symbols)."""


# (e_machine, 64-bit) -> architecture, named as autosched.hardware.normalize_arch names them
_ELF_MACHINES = {
    (3, False): "x86",
    (62, True): "x86_64",
    (40, False): "arm",
    (183, True): "aarch64",
    (243, True): "riscv64",
    (21, True): "ppc64",
}


def elf_machine(path: str | Path) -> str | None:
    """The architecture an ELF file is built for (``x86_64``, ``aarch64``, ...), or None if not known."""
    with open(path, "rb") as f:
        header = f.read(20)
    if len(header) < 20 or header[:4] != b"\x7fELF":
        return None
    code = int.from_bytes(header[18:20], "little" if header[5] == 1 else "big")
    return _ELF_MACHINES.get((code, header[4] == 2))


# Loaded libraries are never closed: unloading a library whose OpenMP threads are still alive
# (libgomp keeps its thread pool) crashes the process later. Libraries are small and cached.
_LOADED: dict[tuple[str, str, int, int, tuple[str, ...]], tuple[cffi.FFI, object]] = {}


def load_kernel(
    lib_path: str | Path,
    func_name: str,
    args: Sequence[ArgSpec],
    sizes: Sequence[str] = (),
    scalars: Sequence[ScalarArg] = (),
) -> Kernel:
    """Load kernel ``func_name`` and its ``func_name__time`` entry point from a shared library
    (and ``func_name__bench`` where the library has it: emitted libraries do).

    Raises :class:`LoadError` if the library is missing, was built for another machine (a
    cross-compiled kernel runs only on its board) or lacks either function, or if it is a kernel
    cache entry (named by its content key) that is not the one autosched recorded, or lies in a
    cache folder others may write (:mod:`.cache_trust`). ``sizes`` names the
    kernel's ``int`` size parameters after the arrays (a kernel over symbolic shapes); ``scalars``
    are its scalar arguments (those not ``is_size`` are C parameters after the sizes).
    """
    path = Path(lib_path)
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", func_name):
        raise ValueError(f"kernel name {func_name!r} is not a C identifier")
    if not path.is_file():
        raise LoadError(f"kernel library {path} does not exist")
    machine = elf_machine(path)
    if machine is not None and machine != host_arch():
        raise LoadError(
            f"{path} is built for {machine} but this host is {host_arch()}: a cross-compiled "
            "kernel cannot be loaded here; run it on its board"
        )
    ctypes = tuple(dtype_info(sc.dtype).c_name for sc in scalars if not sc.is_size)
    pointers = "".join(["void *, "] * len(args)) + "".join(["int, "] * len(sizes))
    pointers += "".join(f"{c}, " for c in ctypes)
    key = (str(path.resolve()), func_name, len(args), len(sizes), ctypes)
    loaded = _LOADED.get(key)
    if loaded is None:
        _check_cached(path)  # loading runs the library's constructors
        ffi = cffi.FFI()
        ffi.cdef(
            f"int {func_name}({pointers.removesuffix(', ') or 'void'});\n"
            f"double {func_name}__time({pointers}int number);\n"
            f"int {func_name}__bench({pointers}int number, int repeat, double min_repeat_ms,"
            " unsigned char *flush_buf, size_t flush_bytes, double cooldown_ms, double *times);"
        )
        try:
            loaded = (ffi, ffi.dlopen(key[0]))
        except OSError as e:
            raise LoadError(f"cannot load {path}: {e}") from None
        _check_extensions(path, func_name)
        _LOADED[key] = loaded
    ffi, lib = loaded
    try:
        return Kernel(ffi, lib, func_name, args, sizes, scalars)
    except AttributeError as e:
        raise LoadError(f"{path} lacks a symbol the kernel needs: {e}") from None


def kernel_extensions(path: str | Path) -> tuple[str, ...]:
    """The CPU extensions a kernel library's intrinsics need (its ``asc_cpu_extensions`` string)."""
    ffi = cffi.FFI()
    ffi.cdef(f"extern const char {EXTENSIONS_SYMBOL}[64];")
    lib = ffi.dlopen(str(path))
    try:
        text = ffi.string(getattr(lib, EXTENSIONS_SYMBOL)).decode()
    except (AttributeError, KeyError):  # no such symbol: a kernel without such intrinsics
        return ()
    return tuple(e for e in text.split(",") if e)


def _check_extensions(path: Path, func_name: str) -> None:
    """Refuse, in one line, a kernel that needs a CPU extension this CPU lacks (it would die of an
    illegal instruction); ask for the AMX permission for one that uses AMX tiles."""
    try:
        check_extensions(kernel_extensions(path), f"kernel {func_name!r} ({path.name})")
    except RuntimeError as e:
        raise LoadError(str(e)) from None


def _check_cached(path: Path) -> None:
    """Refuse a kernel cache entry that is not the library autosched built (see
    :mod:`.cache_trust`); a library outside the cache's naming is the caller's own."""
    if not is_cache_entry(path):
        return
    try:
        check_folder(path.parent)
    except CacheUntrusted as e:
        raise LoadError(str(e)) from None
    state = verify(path)
    if state != State.OK:
        why = "no record of its content" if state == State.UNRECORDED else "its content changed since"
        raise LoadError(f"{path} is not a library autosched built ({why}): not loaded; build it again")
