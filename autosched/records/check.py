"""Checks of what a tuning log says. Logs are shared between people and machines, so any line may
have been crafted: a log is untrusted input.

Every line is checked when it is read (:meth:`~autosched.records.Record.from_line` and the log
readers); the checks are cheap per line, and the costly ones are done once per distinct value:

- field types: strings are strings, numbers are numbers (not ``true``, not ``"nan"``);
- costs: a list of finite seconds, non-empty and positive for a valid (``NO_ERROR``) measurement;
  ``all_cost`` and ``timestamp`` finite and in range (:func:`check_costs`, :func:`check_number`);
- speed: no cost of a valid measurement shorter than a kernel call can be (:data:`MIN_SECONDS`),
  nor than the workload's operations take at a rate no device of the target's kind reaches
  (:func:`~autosched.target.peak_ops`; :func:`check_speed`, once per workload and target);
- the target string: known options only, with values of a strict form (:func:`check_target`);
  compiler flags from a whitelist, so that no flag can load a plugin, run a program or read a file;
- the workload: its arguments re-create its key, DAG hash included, when the workload is
  registered here (:func:`check_workload`; once per workload key).

Whether a program's steps replay is checked only for the records chosen as best
(:func:`replay_error`): :func:`autosched.records.pick_best` falls back to the next best program,
with a warning, when the best does not replay.

A log never chooses the compiler that runs here: :func:`logged_target` reads a log's target with
the compiler of this machine (the user's target, ``$CC`` or gcc) in place of the log's, and says
when the log named another one.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..diagnostics import printable
from ..hardware import ARCH_DEFAULTS, host_arch, normalize_arch
from ..intrin.isa import missing_extensions, steps_extensions
from ..ops.registry import Workload, WorkloadDef, registered
from ..schedule import Schedule
from ..target import OPTIONS, Target, TargetError, kind_options, peak_ops, target_kinds
from .io import RecordError

if TYPE_CHECKING:
    from .log import Record

__all__ = [
    "check_costs",
    "check_number",
    "check_speed",
    "check_target",
    "check_text",
    "check_workload",
    "compiler_here",
    "logged_target",
    "replay_error",
]

_INF = math.inf

#: the largest magnitude of an integer workload argument (no tensor has 2**40 elements a side)
MAX_INT_ARG = 1 << 40
#: the longest target string, workload name or string argument read from a log
MAX_TEXT = 4096

# ---------------------------------------------------------------------------------------------
# Scalars


def check_text(value: Any, what: str) -> str:
    """``value`` if it is a string, else :class:`RecordError`."""
    if type(value) is not str:
        raise RecordError(f"{what} must be a string, got {type(value).__name__}")
    return value


_MACHINE = re.compile(r"[a-z0-9_]{1,32}-[0-9a-f]{12}")


def check_machine(value: Any) -> str:
    """A machine fingerprint (``x86_64-0123456789ab``) or the empty string."""
    if type(value) is not str or (value and not _MACHINE.fullmatch(value)):
        example = "x86_64-0123456789ab"
        raise RecordError(f"machine must be a fingerprint like {example}, not {printable(value, 40)}")
    return value


def check_number(value: Any, what: str, low: float, high: float) -> float:
    """``value`` as a float if it is a JSON number (not a bool or a string) in ``[low, high]``."""
    if value.__class__ is not float and value.__class__ is not int:
        raise RecordError(f"{what} must be a number, got {type(value).__name__} {printable(value, 40)}")
    try:
        x = float(value)
    except OverflowError:
        raise RecordError(f"{what} is out of range") from None
    if not low <= x <= high:  # NaN fails too
        raise RecordError(f"{what} {x!r} is out of range [{low:g}, {high:g}]")
    return x


def check_costs(value: Any, valid: bool) -> tuple[float, ...]:
    """The seconds of a record's ``costs``: finite and >= 0, non-empty and > 0 if ``valid``."""
    if value.__class__ is not list:
        raise RecordError(f"costs must be a list of seconds, got {type(value).__name__}")
    for c in value:
        if c.__class__ is not float and c.__class__ is not int:
            raise RecordError(f"costs must be numbers of seconds, got {type(c).__name__} {printable(c, 40)}")
    try:
        costs = tuple(map(float, value))
    except OverflowError:
        raise RecordError("a cost is out of range") from None
    if valid:
        if not costs:
            raise RecordError("a valid measurement (NO_ERROR) without costs")
        for c in costs:
            if not 0.0 < c < _INF:
                raise RecordError(f"cost {c!r} of a valid measurement is not a positive finite number")
    else:
        for c in costs:
            if not 0.0 <= c < _INF:
                raise RecordError(f"cost {c!r} is not a finite number of seconds >= 0")
    return costs


#: the shortest time one call of any kernel takes, in seconds: the timing harness calls a kernel
#: through a function pointer, and a call and its return take cycles (1e-10 s is half a cycle at
#: 5 GHz); a GPU kernel's launch alone takes microseconds
MIN_SECONDS = 1e-10

#: (workload key, target) -> (the shortest plausible seconds, the workload's operations, the
#: kind's peak, the workload's definition when they were counted)
_SHORTEST: dict[tuple[str, str], tuple[float, int, float, WorkloadDef | None]] = {}


def _operations(workload: tuple[str, tuple[Any, ...]]) -> int:
    """The arithmetic operations of one run of ``workload`` (0 where it is not registered here)."""
    name, args = workload
    if registered(name) is None:
        return 0
    try:
        return max(0, int(Workload(name, args).flops()))
    except Exception:  # a workload function may fail anywhere; its key was checked, not its count
        return 0


def check_speed(
    costs: tuple[float, ...], workload: tuple[str, tuple[Any, ...]], key: str, target: str
) -> None:
    """:class:`RecordError` where a cost of a valid measurement of ``workload`` (key ``key``) on
    ``target`` (a string :func:`check_target` accepted) is shorter than any real run: under
    :data:`MIN_SECONDS`, or so short that the workload's operations would run faster than any
    device of the target's kind (:func:`~autosched.target.peak_ops`). Such a cost would win
    ``best`` with an absurd speed."""
    bound = _SHORTEST.get((key, target))
    if bound is None or registered(workload[0]) is not bound[3]:
        ops, peak = _operations(workload), peak_ops(target.split(None, 1)[0])
        bound = (max(MIN_SECONDS, ops / peak), ops, peak, registered(workload[0]))
        _remember(_SHORTEST, (key, target), bound)
    fastest = min(costs)
    if fastest >= bound[0]:
        return
    shortest, ops, peak, _ = bound
    if ops / peak > MIN_SECONDS:
        kind = target.split(None, 1)[0]
        raise RecordError(
            f"cost {fastest!r} s of a valid measurement is impossibly short: {ops} operations in it "
            f"are {ops / fastest:.3g} per second, more than any {kind} device runs ({peak:.0e})"
        )
    raise RecordError(
        f"cost {fastest!r} s of a valid measurement is impossibly short: no kernel call takes under "
        f"{MIN_SECONDS:g} s"
    )


# ---------------------------------------------------------------------------------------------
# Targets

_NAME = re.compile(r"[A-Za-z0-9_.+-]{1,64}")  # a CPU name or triple: no path, no '='
_COMMAND = re.compile(r"[A-Za-z0-9_.+/=-]{1,255}")

#: compiler flags a log may carry (-cflags='...'): optimization, code generation and warning
#: flags, macro definitions. No flag that names a file or a program (-B, -wrapper, -specs,
#: -fplugin, -include, @file, -Wl,...), writes one (-fdump-*, -fprofile-*) or runs one.
_FLAGS = re.compile(
    r"-O(0|1|2|3|s|z|g|fast)?"
    r"|-f(no-)?(unroll-[a-z-]+|peel-loops|tree-[a-z-]+|vect-cost-model|simd-cost-model|fast-math"
    r"|unsafe-math-optimizations|associative-math|reciprocal-math|finite-math-only|signed-zeros"
    r"|trapping-math|math-errno|rounding-math|strict-aliasing|omit-frame-pointer|openmp|openmp-simd"
    r"|pic|PIC|pie|PIE|prefetch-loop-arrays|schedule-insns2?|inline-[a-z-]+|ipa-[a-z-]+|loop-[a-z-]+"
    r"|gcse[a-z-]*|split-loops|version-loops-for-strides|expensive-optimizations|fp-contract"
    r"|excess-precision|cx-limited-range|vectorize|slp-vectorize|align-[a-z]+)(=[a-z0-9-]{1,32})?"
    r"|-m[a-z0-9][a-z0-9-]{0,40}(=[A-Za-z0-9_.+-]{1,64})?"
    r"|-D[A-Za-z_][A-Za-z0-9_]{0,63}(=[A-Za-z0-9_.+-]{0,64})?|-U[A-Za-z_][A-Za-z0-9_]{0,63}"
    r"|-g[0-3]?|-w|-W(no-)?[a-z][a-z0-9-]{0,40}(=[0-9]{1,4})?"
    r"|-std=(c|gnu)(89|90|99|9x|11|1x|17|18|2x|23)|-pedantic(-errors)?|-ansi|-pipe|-pthread"
)


def _flags_ok(flags: tuple[str, ...]) -> str | None:
    bad = [f for f in flags if not _FLAGS.fullmatch(f)]
    return f"compiler flags {bad} are not allowed in a log" if bad else None


def _at_most(limit: int) -> Callable[[Any], str | None]:
    return lambda v: None if v <= limit else f"more than {limit}"


def _matches(pattern: re.Pattern[str]) -> Callable[[Any], str | None]:
    return lambda v: None if pattern.fullmatch(v) else f"not of the form {pattern.pattern}"


#: what a log's option values must satisfy beyond parsing, by option name
_LOG_VALUES: dict[str, Callable[[Any], str | None]] = {
    "cc": _matches(_COMMAND),
    "mcpu": _matches(_NAME),
    "mfpu": _matches(_NAME),
    "mtriple": _matches(_NAME),
    "cflags": _flags_ok,
    "num-threads": _at_most(4096),
    "cores": _at_most(4096),
    "vector-bytes": _at_most(1024),
    "l1": _at_most(1 << 40),
    "l2": _at_most(1 << 40),
    "l3": _at_most(1 << 40),
    "max-threads-per-block": _at_most(1 << 16),
    "shared-memory-bytes": _at_most(1 << 32),
    "warp-size": _at_most(1024),
}

_TARGETS: dict[str, str | None] = {}  # target string -> why it is not allowed (None: allowed)


def _target_problem(spec: str) -> str | None:
    """Why a log may not name target ``spec`` (None if it may). Runs nothing."""
    if len(spec) > MAX_TEXT:
        return "the target string is too long"
    try:
        tokens = shlex.split(spec)
    except ValueError as err:
        return f"cannot read target '{spec}': {err}"
    if not tokens or tokens[0] not in target_kinds():
        return f"unknown target kind in '{spec}'"
    accepted, seen = kind_options(tokens[0]), set()
    for token in tokens[1:]:
        m = re.fullmatch(r"-([a-z0-9-]+)=(.*)", token, re.DOTALL)
        if m is None or m.group(1) not in accepted or m.group(1) in seen:
            return f"option '{token}' is not allowed in target '{spec}'"
        name = m.group(1)
        seen.add(name)
        try:
            value = OPTIONS[name].parse(m.group(2))
        except ValueError as err:
            return f"bad value in option '{token}' of target '{spec}': {err}"
        check = _LOG_VALUES.get(name)
        why = check(value) if check is not None else None
        if why is not None:
            return f"option '{token}' of target '{spec}': {why}"
    return None


def check_target(spec: Any) -> str:
    """``spec`` if a log may name it: a string of a known kind and options whose values have a
    strict form (see :data:`_FLAGS` for compiler flags); else :class:`RecordError`. Runs no
    program (unlike :meth:`Target.parse`, which may ask a compiler for its architecture)."""
    if type(spec) is not str:
        raise RecordError(f"target must be a string, got {type(spec).__name__}")
    try:
        why = _TARGETS[spec]
    except KeyError:
        why = _target_problem(spec)
        _remember(_TARGETS, spec, why)
    if why is not None:
        raise RecordError(why)
    return spec


def compiler_here(cc: str | None = None) -> str:
    """The C compiler for programs of a log: ``cc`` if given, else ``$CC`` if it is one command,
    else gcc. Never one named by the log."""
    if cc:
        return cc
    env = os.environ.get("CC", "").strip()
    return env if _COMMAND.fullmatch(env) else "gcc"


def logged_target(spec: str, cc: str | None = None) -> tuple[Target, str | None]:
    """The target a log names, with the compiler of this machine (:func:`compiler_here`) in place of
    the log's; and the compiler the log named if it differs (None otherwise).

    Raises :class:`~autosched.target.TargetError` for a target a log may not name
    (:func:`check_target`). Only the compiler chosen here may be run (to ask its architecture).
    """
    try:
        check_target(spec)
    except RecordError as err:
        raise TargetError(str(err)) from None
    here = compiler_here(cc)
    tokens = shlex.split(spec)
    named = next((t[len("-cc=") :] for t in tokens if t.startswith("-cc=")), None)
    kept = [t for t in tokens if not t.startswith("-cc=")]
    if "cc" in kind_options(tokens[0]):
        kept.append(f"-cc={here}")
    return Target.parse(shlex.join(kept)), named if named is not None and named != here else None


# ---------------------------------------------------------------------------------------------
# Workloads and programs


#: (workload key, workload JSON text) -> (the workload as (name, args), its definition, why not)
_CHECKED: dict[tuple[str, str], tuple[tuple[str, tuple[Any, ...]], WorkloadDef | None, str | None]] = {}
#: workload key -> (the JSON value last checked with it, then as in _CHECKED): lines of one task
#: share their decoded opening (see io.split_line), so this is hit by identity
_LAST: dict[str, tuple[Any, tuple[str, tuple[Any, ...]], WorkloadDef | None, str | None]] = {}


def _workload_problem(value: Any, key: str) -> tuple[tuple[str, tuple[Any, ...]], str | None]:
    """The workload of ``value`` (``[name, [args...]]``) and why it does not go with ``key``."""
    if type(value) is not list or len(value) != 2 or type(value[0]) is not str or type(value[1]) is not list:
        raise RecordError("workload must be [name, [args...]]")
    name, args = value[0], tuple(value[1])
    workload = (name, args)
    if len(name) > MAX_TEXT or len(args) > 64:
        return workload, "the workload name or argument list is too long"
    for a in args:
        kind = type(a)
        if kind is int and abs(a) > MAX_INT_ARG:
            return workload, f"workload argument {a} is out of range"
        if kind is float and not math.isfinite(a):
            return workload, f"workload argument {a} is not finite"
        if kind is str and len(a) > MAX_TEXT:
            return workload, "a workload argument is too long"
        if kind not in (bool, int, float, str):
            return workload, f"workload arguments are JSON scalars, got {kind.__name__}"
    if registered(name) is None:
        return workload, None  # not registered here: the key cannot be checked, and nothing runs it
    try:
        real = Workload(name, args).key
    except Exception as err:  # the workload function itself rejects the arguments
        return workload, f"workload {name}{list(args)} cannot be built: {type(err).__name__}: {err}"
    if real != key:
        return workload, f"workload key {key} is not the key of its arguments: {real}"
    return workload, None


def check_workload(value: Any, key: Any) -> tuple[str, tuple[Any, ...]]:
    """The workload ``(name, args)`` of a record whose ``workload`` is ``value`` and whose key is
    ``key``; :class:`RecordError` unless the arguments re-create the key (DAG hash included) of
    the workload registered under that name. A workload not registered here cannot be checked; it
    is accepted (nothing can be built from it here). Each distinct (key, workload) is checked once."""
    if type(key) is not str:
        raise RecordError(f"workload_key must be a string, got {type(key).__name__}")
    hit = _LAST.get(key)
    if hit is None or hit[0] is not value or registered(hit[1][0]) is not hit[2]:
        try:
            text = json.dumps(value)  # types kept apart: 1, 1.0 and true differ
        except (TypeError, ValueError):
            raise RecordError("workload must be [name, [args...]]") from None
        entry = _CHECKED.get((key, text))
        if entry is None or registered(entry[0][0]) is not entry[1]:
            workload, why = _workload_problem(value, key)
            entry = (workload, registered(workload[0]), why)
            _remember(_CHECKED, (key, text), entry)
        hit = (value, *entry)
        _remember(_LAST, key, hit)
    if hit[3] is not None:
        raise RecordError(hit[3])
    return hit[1]


def _remember(cache: dict[Any, Any], key: Any, value: Any) -> None:
    if len(cache) >= 4096:
        cache.clear()
    cache[key] = value


_REPLAYS: dict[tuple[str, Any, bool], str | None] = {}


def _builds_for_host(spec: str) -> bool:
    """Whether a log's target string builds for this host's architecture, judged from its
    ``-mtriple`` or its compiler's name prefix (``aarch64-linux-gnu-gcc``) alone: no compiler a
    log names is run; a target naming neither builds for the host."""
    tokens = shlex.split(spec)
    triple = next((t.split("=", 1)[1] for t in tokens if t.startswith("-mtriple=")), None)
    cc = next((t.split("=", 1)[1] for t in tokens if t.startswith("-cc=")), None)
    named = triple or (cc and os.path.basename(cc))
    arch = normalize_arch(named.split("-")[0]) if named else None
    return arch not in ARCH_DEFAULTS or arch == host_arch()


def replay_error(record: Record) -> str | None:
    """Why the steps of ``record`` do not replay on its workload (or, for a target this host runs,
    tensorize with intrinsics needing CPU extensions this CPU lacks, such as AMX; a board's
    records, e.g. an aarch64 target's with sdot, are not judged by this CPU); None if they do, or
    if the workload is not registered here (it cannot be replayed, nor built)."""
    name, args = record.workload
    if registered(name) is None:
        return None
    here = _builds_for_host(record.target)
    key = (record.workload_key, record.steps, here)
    try:
        return _REPLAYS[key]
    except KeyError:
        pass
    try:
        Schedule.replay(Workload(name, args).outputs, record.steps)
        lacking = missing_extensions(steps_extensions(record.steps)) if here else []
        why = None
        if lacking:
            why = f"its intrinsics need CPU extension(s) {', '.join(lacking)}, which this CPU lacks"
    except Exception as err:  # a crafted program may fail anywhere in the schedule layer
        why = f"{type(err).__name__}: {err}"
    _remember(_REPLAYS, key, why)
    return why
