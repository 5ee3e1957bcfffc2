"""Compile C source with the target's compiler, caching shared libraries by content.

A library's cache key is the sha256 of the source, the compiler command (compiler and flags) and
the compiler's ``--version`` output, so a changed flag or an upgraded compiler never reuses a stale
build. Builds write to a temporary name and ``os.replace`` it into place, so processes sharing a
cache directory never see half-written files. A library in the cache is used only if the cache
folder is private and the library matches the sha256 recorded when it was built
(:mod:`.cache_trust`); else it is built again. Failures raise :class:`BuildError` subclasses.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

from ..target import Target
from ..te.ccode import NO_CODE, CCode
from .cache_trust import State, private_folder, record, say_changed, sha256_of, verify
from .errors import InfrastructureError
from .linking import extern_flags, extern_link, missing_function

#: Link flags placed after the source file and the math libraries.
LIBS = ("-Wl,-z,nodelete",)  # never unloaded: OpenMP threads may outlive a dlclose

_INSTALL_HINTS: tuple[tuple[str, str], ...] = (
    (r"^aarch64-linux-gnu-", "apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross"),
    (r"^arm-linux-gnueabihf-", "apt-get install gcc-arm-linux-gnueabihf libc6-dev-armhf-cross"),
    (r"clang", "apt-get install clang lld libomp-dev"),
    (r"gcc|^cc$", "apt-get install gcc"),
)


class BuildError(RuntimeError):
    """A C source could not be built."""


class CompilerNotFound(BuildError, InfrastructureError):
    """The target's compiler is not installed (the message says what to install)."""


class CacheUnusable(BuildError, InfrastructureError):
    """The kernel cache directory cannot be created or written (read-only, full, no permission)."""

    @classmethod
    def at(cls, cache: Path, error: object) -> CacheUnusable:
        """The error for directory ``cache``, saying what went wrong and what to do."""
        fix = "set AUTOSCHED_CACHE to a writable directory with free space"
        return cls(f"cannot write the kernel cache {cache}: {error}; {fix}")


class TempDirUnusable(BuildError, InfrastructureError):
    """No private temporary directory for the compiler can be made (``TMPDIR`` full or read-only)."""


class CompileError(BuildError):
    """The compiler rejected the source; ``stderr`` and ``command`` keep what it said and was run with."""

    def __init__(self, command: Sequence[str], stderr: str) -> None:
        self.command = list(command)
        self.stderr = stderr
        lines = stderr.strip().splitlines()
        shown = "\n".join(lines[:40] + ([f"... ({len(lines) - 40} more lines)"] if len(lines) > 40 else []))
        hint = ""
        if "omp.h" in stderr and "clang" in Path(command[0]).name:
            hint = "\nclang needs LLVM's OpenMP headers: apt-get install libomp-dev"
        super().__init__(f"compile failed: {shlex.join(command)}\n{shown}{hint}")


class MissingCFunction(CompileError):
    """A C function the kernel calls is defined nowhere: not in its C source, headers or libraries."""

    def __init__(self, command: Sequence[str], stderr: str, symbol: str) -> None:
        super().__init__(command, stderr)
        self.symbol = symbol
        self.args = (
            f"the C function {symbol!r} that the kernel calls does not exist: define it in c_source=, "
            f"include its header (headers=) or link its library (libs=)\n{self.args[0]}",
        )


class BuildTimeout(BuildError):
    """The compiler ran longer than the timeout and was killed."""

    def __init__(self, command: Sequence[str], timeout: float) -> None:
        self.command = list(command)
        self.timeout = timeout
        super().__init__(f"compiler killed after {timeout:g} s: {shlex.join(command)}")


def _install_hint(cc: str) -> str:
    """What to install to get compiler ``cc``."""
    name = Path(cc).name
    for pattern, hint in _INSTALL_HINTS:
        if re.search(pattern, name):
            return hint
    return "install it, or name another compiler with -cc=PATH in the target"


def _not_found(cc: str, why: str) -> CompilerNotFound:
    return CompilerNotFound(f"C compiler {cc!r} {why}: {_install_hint(cc)}")


@functools.cache
def compiler_version(cc: str) -> str:
    """The ``--version`` output of compiler ``cc`` (looked up once per process)."""
    if shutil.which(cc) is None:
        raise _not_found(cc, "not found")
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=60)
    except OSError as e:
        raise _not_found(cc, f"cannot run ({e})") from None
    except subprocess.TimeoutExpired:
        raise _not_found(cc, "did not answer --version within 60 s") from None
    return out.stdout + out.stderr


def default_cache_dir() -> Path:
    """``$AUTOSCHED_CACHE`` if set, else ``~/.cache/autosched/kernels``."""
    env = os.environ.get("AUTOSCHED_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "autosched" / "kernels"


#: compiler processes started by this process, each with its private temporary directory
_running: dict[subprocess.Popen[str], str] = {}
_running_lock = threading.Lock()

#: what a compiler says when it cannot write its output (the machine's fault, not the program's)
_CANNOT_WRITE = re.compile(
    r"No space left on device|Read-only file system|cannot open output file|Disk quota"
)


def kill_running_compiles() -> None:
    """SIGKILL every compiler this process has running, with its children (cc1, as, ld), and
    remove the temporary files they can no longer remove themselves."""
    with _running_lock:
        running = list(_running.items())
    for proc, scratch in running:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        shutil.rmtree(scratch, ignore_errors=True)


def _run(command: list[str], timeout: float) -> None:
    """Run a compiler command; kill its whole process group if it outlives ``timeout``.

    The compiler's temporary files (``.s``, ``.o`` between its stages) go to a private directory
    (``TMPDIR``), removed afterwards, also when the compiler is killed."""
    try:
        scratch = tempfile.mkdtemp(prefix="autosched-cc-")
    except OSError as e:
        raise TempDirUnusable(f"cannot create a temporary directory for the compiler: {e}; set TMPDIR "
                              "to a writable directory with free space") from None
    try:
        proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
            env={**os.environ, "TMPDIR": scratch},
        )
    except OSError as e:
        shutil.rmtree(scratch, ignore_errors=True)
        raise _not_found(command[0], f"cannot run ({e})") from None
    with _running_lock:
        _running[proc] = scratch
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise BuildTimeout(command, timeout) from None
    finally:
        with _running_lock:
            _running.pop(proc, None)
        shutil.rmtree(scratch, ignore_errors=True)
    if proc.returncode != 0:
        message = err or out
        found = _CANNOT_WRITE.search(message)
        if found:
            raise CacheUnusable.at(Path(command[command.index("-o") + 1]).parent, found.group(0))
        raise CompileError(command, message)


def _write_atomic(path: Path, data: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def compile_shared(
    source: str,
    target: Target,
    *,
    timeout: float = 120,
    cache_dir: Path | None = None,
    code: CCode = NO_CODE,
) -> Path:
    """Build ``source`` into a shared library for ``target``; return its path in the cache.

    ``code`` is the user C the source calls (see :class:`~autosched.te.ccode.CCode`): its
    directories and libraries are passed to the compiler, and a C function that exists nowhere is
    a :class:`MissingCFunction`. A library already built from the same source, compiler command
    (with those) and compiler version is returned without compiling. Raises
    :class:`CompilerNotFound`, :class:`CompileError` or :class:`BuildTimeout`.
    """
    flags, libs = _shared_command(target, code)
    return _cached_build(source, target, flags, libs, ".so", timeout, cache_dir, code)


def _shared_command(target: Target, code: CCode) -> tuple[list[str], list[str]]:
    """The compiler flags and the link libraries of a shared library for ``target``."""
    return [*target.cflags(shared=True), *extern_flags(code)], [*extern_link(code), *target.libs(), *LIBS]


def shared_library_name(source: str, target: Target, code: CCode = NO_CODE) -> str:
    """The file name :func:`compile_shared` gives the library of ``source`` in the kernel cache
    (its content key with this machine's compiler version, and ``.so``)."""
    flags, libs = _shared_command(target, code)
    return _cache_key(source, target, flags, libs) + ".so"


def _cache_key(source: str, target: Target, flags: list[str], libs: Sequence[str]) -> str:
    """The content key of a build: source, compiler command and compiler version."""
    cc = target.cc
    if cc is None:
        raise BuildError(f"{target.kind} targets are not built with a C compiler")
    version = compiler_version(cc)
    return hashlib.sha256(json.dumps([source, cc, flags, list(libs), version]).encode()).hexdigest()[:40]


def _executable_command(target: Target, code: CCode) -> tuple[list[str], list[str]]:
    """The flags and libraries of a static executable of ``target`` calling the user C ``code``."""
    flags = [f for f in target.cflags(shared=False) if f != "-fPIC"] + ["-static", "-s", *extern_flags(code)]
    return flags, [*extern_link(code), *target.libs()]


def executable_name(source: str, target: Target, code: CCode = NO_CODE) -> str:
    """The file name :func:`compile_executable` gives the executable of ``source`` in its cache."""
    flags, libs = _executable_command(target, code)
    return _cache_key(source, target, flags, libs) + ".exe"


def compile_executable(
    source: str, target: Target, *, timeout: float = 120, cache_dir: Path | None = None, code: CCode = NO_CODE
) -> Path:
    """Build ``source`` (with its ``main``) into a static executable for ``target``, cached like
    :func:`compile_shared`: it needs no library on the machine that runs it (a board); the
    libraries the user C ``code`` names are linked statically."""
    flags, libs = _executable_command(target, code)
    return _cached_build(source, target, flags, libs, ".exe", timeout, cache_dir, code)


def _cached_build(
    source: str,
    target: Target,
    flags: list[str],
    libs: Sequence[str],
    suffix: str,
    timeout: float,
    cache_dir: Path | None,
    code: CCode = NO_CODE,
) -> Path:
    """Compile ``source`` with ``flags`` and ``libs`` into the cache as ``<key><suffix>`` (``code``:
    the user C it calls, to name a missing C function)."""
    key = _cache_key(source, target, flags, libs)  # raises BuildError for a kind without a C compiler
    cc = target.cc
    assert cc is not None
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    try:
        private_folder(cache)
    except OSError as e:
        raise CacheUnusable.at(cache, e.strerror or e) from None
    lib = cache / f"{key}{suffix}"
    state = verify(lib)
    if state == State.OK:
        return lib
    if state == State.CHANGED:
        say_changed(lib)
    src = cache / f"{key}.c"
    try:
        _write_atomic(src, source)
        fd, tmp = tempfile.mkstemp(dir=cache, prefix=f"{key}.", suffix=f"{suffix}.tmp")
    except OSError as e:
        raise CacheUnusable.at(cache, e.strerror or e) from None
    os.close(fd)
    try:
        _run([cc, *flags, "-o", tmp, str(src), *libs], timeout)
        try:
            record(lib, sha256_of(Path(tmp).read_bytes()))  # the record first: no library without one
            os.replace(tmp, lib)
        except OSError as e:
            raise CacheUnusable.at(cache, e.strerror or e) from None
    except CompileError as e:
        symbol = missing_function(e.stderr, code)
        if symbol is None:
            raise
        raise MissingCFunction(e.command, e.stderr, symbol) from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return lib


def compile_object(
    source: str, target: Target, out: Path, *, extra_flags: Sequence[str] = (), timeout: float = 120
) -> Path:
    """Compile ``source`` to the object file ``out`` (``-c``), with ``extra_flags`` after the target's.

    Uncached; meant for checks such as ``extra_flags=["-Wall", "-Werror"]`` or
    ``["-std=c99", "-pedantic"]`` and for cross-compiled objects. Returns ``out``.
    """
    cc = target.cc
    if cc is None:
        raise BuildError(f"{target.kind} targets are not built with a C compiler")
    out = Path(out)
    with tempfile.TemporaryDirectory(prefix="autosched-") as tmp:
        src = Path(tmp) / (out.stem + ".c")
        src.write_text(source)
        _run([cc, *target.cflags(shared=False), *extra_flags, "-c", "-o", str(out), str(src)], timeout)
    return out
