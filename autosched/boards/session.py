"""One tuning run's use of one board: its run directory, the task inputs there, batches of trials.

On the board, under the board's working directory ``W``::

    W/lock                          held (flock) while a candidate runs: one timing at a time per
                                    board, whichever tuning process or machine asks
    W/run-<host>-<pid>-<token>/     this run's directory, removed by close(); one left by a run
                                    that died is removed by the next run from the same host (its
                                    pid is gone), any other after a day without use
        data-<task hash>/in<k>.bin  the task's inputs, generated here from the seed, sent once
        batch/c<j>.gz               the batch's executables (gzip-compressed), while it runs
        cand, out<k>.bin, t.json    the candidate being timed, its outputs and timings

A batch of candidates is one ssh round trip: their executables go up on stdin as one tar stream
and are unpacked into ``batch/``; then each in turn is decompressed to ``cand`` and runs under
``timeout`` (the board's launcher in front, if any) while it holds the board's lock, and its exit
status, timings, messages and outputs come back as one frame of the answer. A candidate that
crashes or hangs costs its own trial only: the next one runs after it. The outputs are checked
here against the reference.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import secrets
import shlex
import signal
import socket
import tarfile
import time
from collections import OrderedDict
from collections.abc import Sequence
from io import BytesIO
from pathlib import Path

import numpy as np

from ..diagnostics import printable
from ..dtypes import numpy_dtype
from ..expr import static_shape
from ..runner.errors import InfrastructureError
from ..runner.kernel import ArgSpec
from ..runner.measure import BuildResult, MeasureErrorNo, MeasureInput, MeasureOption
from ..runner.measure_worker import compare
from ..task import Task
from .board import PROBE_SCRIPT, Board, BoardInfo, parse_probe
from .program import elf_arch, runs_natively
from .ssh import BoardUnreachable, Connection

__all__ = ["BoardSession", "Job", "Prepared", "TaskData"]

Outcome = tuple[MeasureErrorNo, str, tuple[float, ...]]
#: a task's data on a board: a tag naming its inputs there, the inputs, the expected outputs
Prepared = tuple[str, list[np.ndarray], list[np.ndarray]]
#: a built candidate to time: what was built, and the build
Job = tuple[MeasureInput, BuildResult]

#: seconds a trial waits for the board's lock (another run timing there) before giving up
LOCK_WAIT = 300.0

#: seconds added to a batch's timeouts for the transfers
_SLACK = 30.0

#: the files a trial brings back: timings, messages, then the outputs (out0.bin, ...)
_FILES = ("t.json", "err.txt")

#: exit statuses of the trial script itself (not of the candidate)
_NO_RUN_DIR, _NO_DATA, _LOCK_TIMEOUT = 70, 71, 75

#: what a task data tag may be (it names a directory in the board's scripts)
_TAG = re.compile(r"[A-Za-z0-9]{8,64}")

_MIN_FLUSH, _MAX_FLUSH = 8 << 20, 512 << 20


class TaskData:
    """Each task's random inputs (from ``seed``) and reference outputs, computed once, shared by boards."""

    def __init__(self, seed: int, keep: int = 4) -> None:
        self.seed = seed
        self.keep = keep
        self._data: OrderedDict[tuple[str, str], tuple[list[np.ndarray], list[np.ndarray]]] = OrderedDict()

    def get(self, task: Task) -> tuple[str, list[np.ndarray], list[np.ndarray]]:
        """(a short hash naming the inputs, the inputs, the expected outputs) of ``task``."""
        data = self._data.get(task.key)
        if data is None:
            inputs = task.workload.random_inputs(self.seed)
            expected = list(task.workload.reference(*[a.copy() for a in inputs]))
            data = self._data[task.key] = (inputs, expected)
            while len(self._data) > self.keep:
                self._data.popitem(last=False)
        tag = hashlib.sha256(f"{task.workload_key}|{self.seed}".encode()).hexdigest()[:16]
        return tag, *data


def _host_tag() -> str:
    return re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname())[:40] or "host"


def _frame(data: bytes, names: Sequence[str]) -> tuple[int, list[bytes | None], bytes]:
    """One candidate's frame at the start of ``data``: its exit status, the files ``names`` (None:
    absent) and the rest of ``data``. A frame is ``asc-rc STATUS``, the ``wc -c`` lines of the
    files present, ``asc-data``, their bytes in order."""
    if not data.startswith(b"asc-rc "):
        raise ValueError("no status line")
    head, _, rest = data.partition(b"\n")
    status = int(head[7:])
    table, sep, blob = rest.partition(b"asc-data\n")
    if not sep:
        raise ValueError("no data marker")
    sizes: dict[str, int] = {}
    for line in table.decode(errors="replace").splitlines():
        words = line.split()
        if len(words) == 2 and words[1] in names:
            sizes[words[1]] = int(words[0])
    files: list[bytes | None] = []
    for name in names:
        size = sizes.get(name)
        if size is None:
            files.append(None)
            continue
        if len(blob) < size:
            raise ValueError("truncated answer")
        files.append(blob[:size])
        blob = blob[size:]
    return status, files, blob


def _frames(data: bytes, names: Sequence[Sequence[str]]) -> list[tuple[int, list[bytes | None]]]:
    """The frames of a batch's answer, one per candidate (``names[j]``: candidate ``j``'s files),
    after anything the login's shell start-up may have printed."""
    start = data.find(b"asc-rc ")
    if start < 0:
        raise ValueError("no status line")
    data, out = data[start:], []
    for files in names:
        status, got, data = _frame(data, files)
        out.append((status, got))
    return out


def _archive(paths: Sequence[str]) -> bytes:
    """The executables ``paths`` (gzip-compressed files) as one tar stream: ``c<j>.gz`` in order."""
    buf, now = BytesIO(), time.time()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for j, path in enumerate(paths):
            blob = Path(path).read_bytes()
            info = tarfile.TarInfo(f"c{j}.gz")
            info.size, info.mode, info.mtime = len(blob), 0o600, int(now)
            tar.addfile(info, BytesIO(blob))
    return buf.getvalue()


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _flush_bytes(info: BoardInfo) -> int:
    """Bytes to write before each repeat to flush the board's caches (as the local runner sizes it)."""
    l2, l3 = info.caches.get("l2", 1 << 20), info.caches.get("l3", 0)
    return min(_MAX_FLUSH, max(_MIN_FLUSH, 2 * (l3 + info.cores * l2)))


class BoardSession:
    """This process's use of ``board``: :meth:`start` connects, probes and makes the run directory;
    :meth:`measure_batch` times built candidates sent in one transfer (:meth:`measure`: one);
    :meth:`close` removes the run directory.

    Failures of the board or the connection raise :class:`~autosched.boards.ssh.BoardUnreachable`;
    failures of the candidate are outcomes.
    """

    def __init__(self, board: Board, ssh_config: str | None = None, share: bool = True) -> None:
        self.board = board
        self.conn = Connection(board.name, ssh_config, share)
        self.run_name = f"run-{_host_tag()}-{os.getpid()}-{secrets.token_hex(4)}"
        self.info: BoardInfo | None = None
        self.workdir = ""  # absolute, once started
        self._data: set[str] = set()  # task data sets uploaded to this run directory

    @property
    def run_dir(self) -> str:
        """The absolute run directory on the board (after :meth:`start`)."""
        return f"{self.workdir}/{self.run_name}"

    def start(self) -> BoardInfo:
        """Connect, read the board's hardware, make the run directory and remove stale ones."""
        q = shlex.quote
        script = "\n".join([
            f"mkdir -p {q(self.board.workdir)} && cd {q(self.board.workdir)} || exit 1",
            f": >> lock && mkdir -p {q(self.run_name)} || exit 1",
            f": > {q(self.run_name)}/cand && chmod 700 {q(self.run_name)}/cand || exit 1",
            "find . -maxdepth 1 -name 'run-*' -type d -mtime +1 -exec rm -rf {} + 2>/dev/null",
            "for t in flock timeout gzip tar; do",
            '  command -v "$t" >/dev/null 2>&1 || echo "missing $t" >&2',
            "done",
            f"echo '== runs'; for d in {q(f'run-{_host_tag()}-')}*; do [ -d \"$d\" ] && echo \"$d\"; done",
            "echo '== home'; pwd",
            PROBE_SCRIPT,
        ])  # fmt: skip
        reply = self.conn.run(script, timeout=60.0)
        missing = reply.stderr.decode(errors="replace")
        if reply.status != 0 or "missing " in missing:
            why = printable(missing.strip().splitlines()[-1] if missing.strip() else f"status {reply.status}")
            raise BoardUnreachable(f"board {self.board.name}: cannot prepare {self.board.workdir}: {why}")
        text = reply.stdout.decode(errors="replace")
        runs, _, rest = text.partition("== home\n")
        home, _, _ = rest.partition("\n")
        self.workdir = home.rstrip("\r")
        self._remove_stale([line.strip() for line in runs.splitlines()[1:] if line.strip()])
        self.info = parse_probe(rest)
        self._data.clear()
        return self.info

    def _remove_stale(self, names: Sequence[str]) -> None:
        """Remove the run directories of runs from this host whose process is gone."""
        stale = []
        for name in names:
            m = re.fullmatch(r"run-[A-Za-z0-9._]+-(\d+)-[0-9a-f]+", name)
            if m is None or int(m.group(1)) == os.getpid():
                continue
            try:
                os.kill(int(m.group(1)), 0)
            except ProcessLookupError:
                stale.append(name)
            except PermissionError:  # alive, another user's
                continue
        if stale:
            words = " ".join(shlex.quote(n) for n in stale)
            self.conn.run(f"cd {shlex.quote(self.workdir)} && rm -rf -- {words}", timeout=60.0)

    def close(self) -> None:
        """Remove the run directory (best effort: an unreachable board keeps it until the next
        run from this host) and end the shared connection."""
        if self.workdir:
            with contextlib.suppress(BoardUnreachable):
                self.conn.run(f"rm -rf -- {shlex.quote(self.run_dir)}", timeout=15.0)
        self.conn.close()
        self.workdir = ""

    def _check_runnable(self, executables: Sequence[str]) -> None:
        """Refuse executables of an architecture the board does not run, when it has no launcher:
        the board's shell would read one as a script (execvp's fallback) instead of failing."""
        assert self.info is not None
        if self.board.launcher or self.info.arch == "unknown":
            return
        for arch in sorted({a for a in map(elf_arch, executables) if a is not None}):
            if not runs_natively(self.info.arch, arch):
                name = self.board.name
                raise InfrastructureError(
                    f"board {name} is {self.info.arch} and has no launcher, so it cannot run the "
                    f"candidates ({arch} executables): tune for its own target (autosched boards check "
                    f"{name} suggests one), or name it in a boards file with an emulator as its launcher"
                )

    def _upload(self, tag: str, inputs: Sequence[np.ndarray]) -> None:
        q = shlex.quote
        for k, arr in enumerate(inputs):
            path = f"data-{tag}/in{k}.bin"
            script = f"cd {q(self.run_dir)} || exit {_NO_RUN_DIR}\nmkdir -p data-{tag} && " + (
                f"cat > {q(path + '.tmp')} && mv {q(path + '.tmp')} {q(path)}"
            )
            reply = self.conn.run(script, np.ascontiguousarray(arr).tobytes(), timeout=300.0)
            self._check_status(reply.status, reply.stderr)
        self._data.add(tag)

    def _check_status(self, status: int, stderr: bytes) -> None:
        if status == 0:
            return
        if status == _NO_RUN_DIR:  # the board lost our directory (rebooted, cleaned): start again
            self.workdir = ""
            raise BoardUnreachable(f"board {self.board.name}: the run directory is gone")
        if status == _LOCK_TIMEOUT:
            raise BoardUnreachable(f"board {self.board.name}: busy (its lock was held {LOCK_WAIT:g} s)")
        text = printable(stderr.decode(errors="replace").strip()[-300:] or f"status {status}")
        raise BoardUnreachable(f"board {self.board.name}: the trial script failed: {text}")

    def measure(
        self, inp: MeasureInput, build: BuildResult, data: TaskData, option: MeasureOption
    ) -> Outcome:
        """Run one built candidate on the board and check its outputs (:meth:`measure_batch` of one)."""
        return self.measure_batch([(inp, build)], data, option)[0]

    def measure_batch(self, jobs: Sequence[Job], data: TaskData, option: MeasureOption) -> list[Outcome]:
        """Send the built candidates ``jobs`` to the board in one transfer, run them one after
        another and check each one's outputs; their outcomes, in order (one ssh round trip).

        Raises ``BoardUnreachable`` when the board, not a candidate, failed (no trial of the batch
        is then spent: the caller measures them again, here or elsewhere).
        """
        return self.run_batch([(data.get(inp.task), build) for inp, build in jobs], option)

    def run_batch(self, jobs: Sequence[tuple[Prepared, BuildResult]], option: MeasureOption) -> list[Outcome]:
        """:meth:`measure_batch` of candidates whose task data is given (a Dask board worker's: the
        data comes from the tuning process, the task's workload need not be known here). A tag
        names a task's inputs on the board: letters and digits only."""
        if not all(_TAG.fullmatch(tag) for (tag, _, _), _ in jobs):
            raise ValueError("a task data tag must be 8 to 64 letters or digits")
        if not self.workdir:
            self.start()
        assert self.info is not None and all(build.lib_path is not None for _, build in jobs)
        self._check_runnable([str(build.lib_path) for _, build in jobs])
        tasks = [prepared for prepared, _ in jobs]
        sent = {tag: len(inputs) for tag, inputs, _ in tasks}  # each task's inputs, checked once
        for tag, inputs, _ in tasks:
            if tag not in self._data:
                self._upload(tag, inputs)
        q = shlex.quote
        flush = _flush_bytes(self.info) if option.flush_cache else 0
        settings = [str(option.number), str(option.repeat), repr(float(option.min_repeat_ms)), str(flush),
                    repr(float(option.cooldown_ms))]  # fmt: skip
        script = [
            f"cd {q(self.run_dir)} 2>/dev/null || exit {_NO_RUN_DIR}",
            *(f"[ -f data-{t}/in{n - 1}.bin ] || exit {_NO_DATA}" for t, n in sent.items() if n),
            "rm -rf batch && mkdir batch && tar -xf - -C batch || exit 1",
            f"exec 9>>{q(self.workdir + '/lock')} || exit 1",
            "ulimit -c 0",
        ]  # fmt: skip
        names: list[list[str]] = []
        for j, ((_, build), (tag, _, _)) in enumerate(zip(jobs, tasks, strict=True)):
            files = [*_FILES, *(f"out{k}.bin" for k in range(sum(a.is_output for a in build.arg_specs)))]
            words = [*self.board.launcher, "./cand", f"data-{tag}", *settings]
            script += [
                f"rm -f {' '.join(files)}; gzip -dc batch/c{j}.gz > cand || exit 1",  # cand: mode 700 (start)
                f"flock -w {LOCK_WAIT:g} 9 || exit {_LOCK_TIMEOUT}",
                f"timeout -k 2 {option.run_timeout:g} {' '.join(map(q, words))} >t.json 2>err.txt </dev/null",
                'rc=$?; flock -u 9; echo "asc-rc $rc"',
                f"wc -c {' '.join(files)} 2>/dev/null; echo asc-data; cat {' '.join(files)} 2>/dev/null",
            ]  # fmt: skip
            names.append(files)
        script.append("rm -rf batch; exit 0")
        archive = _archive([str(build.lib_path) for _, build in jobs])
        # the lock is taken per candidate: another run's trials may come in between
        wait = LOCK_WAIT + len(jobs) * 2 * (option.run_timeout + 2.0) + _SLACK
        reply = self.conn.run("\n".join(script), archive, timeout=wait)
        if reply.status == _NO_DATA:
            self._data.difference_update(tag for tag, _, _ in tasks)
            raise BoardUnreachable(f"board {self.board.name}: the task's inputs are gone")
        self._check_status(reply.status, reply.stderr)
        try:
            frames = _frames(reply.stdout, names)
        except ValueError as e:
            raise BoardUnreachable(f"board {self.board.name}: garbled answer ({e})") from None
        outcomes = []
        for (status, got), (_, build), (_, _, expected) in zip(frames, jobs, tasks, strict=True):
            if status in (126, 127):  # the launcher or the executable cannot be started: the set-up's fault
                said = printable((got[1] or b"").decode(errors="replace").strip()[-300:])
                name = self.board.name
                raise InfrastructureError(f"board {name} cannot run candidates ({said}): check its launcher")
            outputs = [a for a in build.arg_specs if a.is_output]
            outcomes.append(_outcome(status, got, outputs, expected, option))
        return outcomes


def _outcome(
    status: int,
    files: list[bytes | None],
    outputs: Sequence[ArgSpec],
    expected: Sequence[np.ndarray],
    option: MeasureOption,
) -> Outcome:
    """The outcome of a trial from the candidate's exit status and files."""
    timings, err, outs = files[0], files[1], files[2:]
    said = printable((err or b"").decode(errors="replace").strip()[-300:])
    if status in (124, 137):
        why = f"no result within {option.run_timeout:g} s; killed on the board"
        return MeasureErrorNo.RUN_TIMEOUT, why, ()
    if status > 128:
        died = f"the candidate died: {_signal_name(status - 128)} {said}".strip()
        return MeasureErrorNo.RUNTIME_ERROR, died, ()
    if status != 0:
        return MeasureErrorNo.RUNTIME_ERROR, f"the candidate exited with status {status}: {said}", ()
    try:
        costs = tuple(float(c) for c in json.loads(timings or b"")["costs"])
    except (ValueError, KeyError, TypeError):
        return MeasureErrorNo.RUNTIME_ERROR, "the candidate printed no timings", ()
    if not costs or not all(math.isfinite(c) and c >= 0 for c in costs):
        return MeasureErrorNo.RUNTIME_ERROR, f"bad timings {printable(costs, 100)}", ()
    if option.check:
        for spec, blob, want in zip(outputs, outs, expected, strict=True):
            dt = numpy_dtype(spec.dtype)
            shape = static_shape(spec.shape)
            if blob is None or len(blob) != math.prod(shape) * dt.itemsize:
                return MeasureErrorNo.RUNTIME_ERROR, f"output {spec.name} missing or short", ()
            problem = compare(spec.name, np.frombuffer(blob, dtype=dt).reshape(shape), want)
            if problem is not None:
                return MeasureErrorNo.WRONG_ANSWER, problem, ()
    return MeasureErrorNo.NO_ERROR, "", costs
