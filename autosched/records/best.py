"""Which record wins: the fastest valid program per (workload, target), and building it.

A program's measurements during tuning are trials; at the end of a run the fastest few are
measured again with more repeats (:mod:`autosched.search.final`), and those records carry
``"remeasure": REPEATS`` in their ``program``. Once a program has been re-measured, its trial
records no longer count: a lucky trial cannot win over its own sober re-measurement, and a program
whose re-measurement failed is passed over. The task's default schedule is re-measured with them and
its record marked ``"baseline": true``; where a task has such a baseline, another program wins only
if its median is :data:`BASELINE_MARGIN` below the baseline's: a search that finds nothing clearly
faster keeps the hand-written schedule rather than a program that won by the timing noise.
:func:`ranked`, :func:`pick_best` and :func:`best_records` apply these rules, :func:`best_so_far`
after each record of a log (a tuning curve); :func:`best_record` and :func:`distill` read a log
with them;
:func:`build_best` builds the winner with the task's own compiler. Programs that do not replay are
passed over with a warning.
"""

from __future__ import annotations

import bisect
import collections
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ..backends.base import Built
from ..diagnostics import printable, warn
from .check import replay_error
from .io import RecordWarning, Scan, open_log, scan, write_atomic
from .io import check as check_found
from .log import Record, record_builder

if TYPE_CHECKING:
    from ..task import Task

__all__ = [
    "BASELINE_KEY",
    "BASELINE_MARGIN",
    "MAX_TRIES",
    "REMEASURE_KEY",
    "NoRecordError",
    "best_record",
    "best_records",
    "best_so_far",
    "distill",
    "is_baseline",
    "is_remeasurement",
    "build_best",
    "pick_best",
    "ranked",
]

#: programs tried, best first, before giving up on a workload whose best programs do not replay
MAX_TRIES = 10
#: the key of a record's ``program`` that marks a final re-measurement (its value: the repeats)
REMEASURE_KEY = "remeasure"
#: the key of a re-measurement's ``program`` that marks the task's default schedule
BASELINE_KEY = "baseline"
#: how much faster than the re-measured default schedule another program must be to win: the
#: medians of one program's re-measurements (10 repeats, interleaved) differ by up to 5-8% from
#: run to run on a shared 2-core machine (AMD EPYC Zen 4, 2026-12-03), so a smaller gain is noise
BASELINE_MARGIN = 0.05


class NoRecordError(LookupError):
    """A tuning log (or list of records) has no valid record for the task asked for."""


def is_remeasurement(record: Record) -> bool:
    """Whether ``record`` is a final re-measurement (not a trial)."""
    return bool(record.program and record.program.get(REMEASURE_KEY))


def is_baseline(record: Record) -> bool:
    """Whether ``record`` is a final re-measurement of the task's default schedule."""
    return is_remeasurement(record) and bool((record.program or {}).get(BASELINE_KEY))


def _scores(records: list[Record]) -> list[tuple[float, Record]]:
    """(score, record) of the records that count: the median, divided by 1 - BASELINE_MARGIN for
    a program other than the baseline of a task that has one (it must beat the baseline by the
    margin; the order of the others among themselves is kept)."""
    with_baseline = {(r.workload_key, r.target) for r in records if r.ok and is_baseline(r)}
    scale = 1.0 / (1.0 - BASELINE_MARGIN)

    def score(r: Record) -> float:
        challenger = not is_baseline(r) and (r.workload_key, r.target) in with_baseline
        return r.median * scale if challenger else r.median

    return [(score(r), r) for r in _standing(records)]


def _standing(records: Iterable[Record]) -> list[Record]:
    """The valid records that count: a re-measured program's re-measurements only."""
    records = records if isinstance(records, list) else list(records)
    again = {(r.workload_key, r.target, r.program_key) for r in records if is_remeasurement(r)}
    return [
        r
        for r in records
        if r.ok and (is_remeasurement(r) or (r.workload_key, r.target, r.program_key) not in again)
    ]


def ranked(records: Iterable[Record]) -> list[Record]:
    """The valid records that count (see the module docstring), fastest first (lowest median, a
    baseline's margin applied; the earliest of equals first)."""
    records = records if isinstance(records, list) else list(records)
    return [r for _, r in sorted(_scores(records), key=lambda sr: sr[0])]


def pick_best(
    records: Iterable[Record], check: Callable[[Record], str | None] | None = replay_error
) -> Record | None:
    """The fastest valid record (the earliest of equals) whose program passes ``check`` (by default:
    its steps replay on its workload); None if there is none.

    A record that fails ``check`` (``check`` returns why) is passed over with a
    :class:`RecordWarning` naming where it was read, and the next best is tried, up to
    :data:`MAX_TRIES` records.
    """
    return _first_passing(ranked(records), check, quiet=False)


def _first_passing(
    candidates: list[Record], check: Callable[[Record], str | None] | None, quiet: bool
) -> Record | None:
    """The first of ``candidates`` (ranked) that passes ``check``, trying at most MAX_TRIES; those
    that fail are warned about unless ``quiet``."""
    for tries, r in enumerate(candidates):
        why = None if check is None else check(r)
        if why is None:
            return r
        if not quiet:
            where = r.origin or "a record"
            warn(
                f"{where}: passed over the best program of {r.workload_key} on {r.target}: {why}",
                RecordWarning,
            )
        if tries + 1 == MAX_TRIES:
            if not quiet:
                warn(
                    f"gave up on {r.workload_key} on {r.target}: its {MAX_TRIES} best programs fail",
                    RecordWarning,
                )
            break
    return None


def best_so_far(
    records: Iterable[Record], check: Callable[[Record], str | None] | None = replay_error
) -> list[Record | None]:
    """For each record of one workload and target, in log order: the best record had the log ended
    with it, i.e. ``pick_best(records[:i + 1], check)`` for every i (the best of a tuning curve), in
    one pass. ``check`` runs at most once per record, and warns of nothing (:func:`pick_best` does).

    A trial only competes with the best so far; a re-measurement (it may retire its program's trials
    or bring a baseline's margin) ranks the records read so far again.
    """
    records = records if isinstance(records, list) else list(records)
    verdicts: dict[int, str | None] = {}

    def checked(r: Record) -> str | None:
        if id(r) not in verdicts:
            verdicts[id(r)] = None if check is None else check(r)
        return verdicts[id(r)]

    scale = 1.0 / (1.0 - BASELINE_MARGIN)
    again: set[str] = set()  # programs re-measured so far: their trials no longer count
    baseline = False  # whether a valid baseline was read: other programs' medians are scaled
    scores: list[float] = []  # the scores of the records that count so far, sorted
    best: Record | None = None
    out: list[Record | None] = []
    for i, r in enumerate(records):
        if is_remeasurement(r):
            again.add(r.program_key)
            baseline = baseline or (r.ok and is_baseline(r))
            pairs = sorted(_scores(records[: i + 1]), key=lambda sr: sr[0])
            scores = [score for score, _ in pairs]
            best = _first_passing([x for _, x in pairs], checked, quiet=True)
        elif r.ok and r.program_key not in again:
            score = r.median * scale if baseline else r.median
            rank = bisect.bisect_right(scores, score)  # after its equals: the earliest of equals wins
            scores.insert(rank, score)
            if best is None:  # every record ranked before it failed the check (pick_best gave None)
                best = r if rank < MAX_TRIES and checked(r) is None else None
            elif score < (best.median * scale if baseline and not is_baseline(best) else best.median):
                # it ranks first among those that pass, or, failing, pushes the best one rank down
                best = r if checked(r) is None else _first_passing(ranked(records[: i + 1]), checked, True)
        out.append(best)
    return out


def best_records(
    records: Iterable[Record], check: Callable[[Record], str | None] | None = replay_error
) -> dict[tuple[str, str], Record]:
    """The best valid record per (workload key, target): the lowest median (a baseline's margin
    applied, see the module docstring), the earliest on ties,
    among those whose program passes ``check`` (by default: replays; see :func:`pick_best`)."""
    records = records if isinstance(records, list) else list(records)
    best: dict[tuple[str, str], Record] = {}
    scores: dict[tuple[str, str], float] = {}
    for score, r in _scores(records):
        key = (r.workload_key, r.target)
        if score < scores.get(key, float("inf")):
            best[key], scores[key] = r, score
    if check is not None:
        for key, r in list(best.items()):
            if check(r) is not None:  # the slow way, for this workload only
                chosen = pick_best([x for x in records if (x.workload_key, x.target) == key], check)
                if chosen is None:
                    del best[key]
                else:
                    best[key] = chosen
    return best


def _no_record(task: Task, where: str, mine: list[Record], others: dict[tuple[str, str], list[int]]) -> str:
    """Why ``where`` has no valid record for ``task``, and what it has instead."""
    text = f"no valid record for {task} in {where}"
    if mine:
        errors = collections.Counter(r.error_no.name for r in mine)
        failed = ", ".join(f"{kind}: {n}" for kind, n in errors.items())
        text += f"; its {len(mine)} records of this task all failed ({failed})"
    if others:
        listed = [
            f"{printable(wk, 100)} on {printable(tg, 100)} ({n} records, {v} valid)"
            for (wk, tg), (n, v) in list(others.items())[:5]
        ]
        if len(others) > 5:
            listed.append(f"and {len(others) - 5} more")
        text += "; it has records of: " + "; ".join(listed)
    elif not mine:
        text += "; it has no records"
    return text


def best_record(
    log: str | os.PathLike[str] | Iterable[Record],
    task: Task,
    *,
    check: Callable[[Record], str | None] | None = replay_error,
) -> Record:
    """The best valid record of ``task`` in a log file or among records, among those whose
    program passes ``check`` (by default: its steps replay; see :func:`pick_best`).

    Raises :class:`NoRecordError` (a ``LookupError``) naming the task and the log, and listing the
    workloads and targets the log does have records of.
    """
    key, target = task.workload.key, str(task.target)
    found: Scan[Record]
    if isinstance(log, (str, os.PathLike)):
        path = Path(log)
        with open_log(path) as (f, size):
            found = scan(f, size, record_builder(path), key, target)
        check_found(found, path)
        where = str(path)
    else:
        found, where = Scan(), "the given records"
        for r in log:
            if (r.workload_key, r.target) == (key, target):
                found.items.append(r)
            else:
                counts = found.others.setdefault((r.workload_key, r.target), [0, 0])
                counts[0] += 1
                counts[1] += r.ok
    best = best_records(found.items, check).get((key, target))
    if best is None:
        raise NoRecordError(_no_record(task, where, found.items, found.others))
    return best


def distill(src: str | os.PathLike[str], dst: str | os.PathLike[str], *, fsync: bool = True) -> int:
    """Write to ``dst`` the best line of each (workload, target) of log ``src``; return how many.

    Lines that are not valid records are left out (with a warning), and so are programs that do
    not replay (see :func:`best_records`). The lines keep their order in ``src``. ``dst`` is
    replaced atomically (a temporary file, then ``os.replace``), so it may be ``src`` itself: the
    source is then locked from reading to replacing, and appends that wait meanwhile go to the
    distilled file.
    """
    src, dst = Path(src), Path(dst)
    try:
        in_place = os.path.samefile(src, dst)
    except FileNotFoundError:
        in_place = False
    with open_log(src, exclusive=in_place) as (f, size):
        found = scan(f, size, record_builder(src))
        check_found(found, src)
        best = best_records(found.items)
        kept = [r for r in found.items if best.get((r.workload_key, r.target)) is r]
        write_atomic(dst, "".join([r.to_line() for r in kept]).encode(), fsync=fsync)
    return len(kept)


def build_best(
    log: str | os.PathLike[str] | Iterable[Record], task: Task, *, cache_dir: Path | None = None
) -> Built:
    """The best program of ``task`` in ``log``, built and loaded: a callable over numpy arrays.

    The program is re-emitted from the record's steps, compiled for ``task.target`` (into
    ``cache_dir``, by default the kernel cache) and loaded: the compiler is the one of
    ``task.target``, never one named by the log. A best program that does not replay or emit is
    passed over with a :class:`RecordWarning` for the next best. Raises :class:`NoRecordError`
    when the log has no valid record of the task.
    """
    def emits(record: Record) -> str | None:
        why = replay_error(record)
        if why is None:
            try:
                task.source(record.steps)
            except Exception as err:  # a crafted program may fail anywhere in lowering
                why = f"{type(err).__name__}: {err}"
        return why

    record = best_record(log, task, check=emits)
    return task.build(record.steps, cache_dir=cache_dir)
