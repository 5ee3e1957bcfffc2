"""What runs on a board worker (``autosched worker --board ALIAS``): measurements on an SSH board.

The worker process holds one :class:`~autosched.boards.session.BoardSession` to its board:
:func:`open_board` connects, reads the board's hardware and makes the run directory before the
worker joins the cluster; every measurement reuses it (one shared ssh connection, the task's inputs
uploaded once); :func:`close_board` removes the run directory when the worker stops. A measurement
is one static executable (built on a build worker) and the task's data, both sent by the tuning
process: the board worker never builds, and needs no cross compiler.
"""

from __future__ import annotations

import sys
import threading
import time

from ..boards import Board, BoardInfo, BoardUnreachable
from ..boards.session import BoardSession
from ..diagnostics import printable
from ..runner.compile import default_cache_dir
from ..runner.measure import BuildResult
from ..target import Target
from .connection import board_family, board_resource, measure_resource
from .work import Measurement, TaskValue, store

#: times a measurement tries the board again (after 1, 2, 4 s) before it gives up on this worker
RETRIES = 3

_session: BoardSession | None = None
_measuring = threading.Lock()


def open_board(board: Board, ssh_config: str | None = None) -> BoardInfo:
    """Open this process's session to ``board`` (raises ``BoardUnreachable``); what the board is."""
    global _session
    session = BoardSession(board, ssh_config)
    info = session.start()
    _session = session
    return info


def close_board() -> None:
    """Remove the run directory on the board and end the connection (best effort)."""
    global _session
    if _session is not None:
        _session.close()
        _session = None


def board_resources(board: Board, info: BoardInfo) -> dict[str, int]:
    """The resources of the worker of ``board``: its target family's measuring resource (the
    architecture of the board's target if it names one, else the board's own) and ``board-ALIAS``."""
    arch = Target.parse(board.target).machine if board.target is not None else info.arch
    return {measure_resource(board_family(arch)): 1, board_resource(board.name): 1}


def _the_session() -> BoardSession:
    if _session is None:
        raise RuntimeError("this Dask worker has no board: start it with autosched worker --board ALIAS")
    return _session


def board_machine() -> str:
    """The fingerprint of this worker's board (the machine its records are valid for)."""
    session = _the_session()
    info = session.info or session.start()
    return info.fingerprint(session.board.launcher)


def measure_on_board(data: TaskValue, job: Measurement) -> tuple[int, str, tuple[float, ...], float]:
    """Check and time the static executable of ``job`` (gzip-compressed) on the board with the
    task data ``data``: (error kind, message, costs, seconds it took). A board that stops
    answering is tried again (said on the worker's stderr); then ``BoardUnreachable``."""
    with _measuring:
        start = time.perf_counter()
        session = _the_session()
        path = store(default_cache_dir() / "boards", job.name, job.blob)
        inputs, expected = data
        build = BuildResult(str(path), job.func_name, job.specs)
        failures = 0
        while True:
            try:
                batch = [((job.key, inputs, expected or []), build)]
                ((error_no, message, costs),) = session.run_batch(batch, job.option)
                return int(error_no), message, costs, time.perf_counter() - start
            except BoardUnreachable as e:
                session.conn.close()  # a fresh connection next time
                failures += 1
                if failures > RETRIES:
                    raise
                wait = 2.0 ** (failures - 1)
                said = f"autosched worker: {printable(str(e), 300)}; trying again in {wait:g} s"
                print(said, file=sys.stderr, flush=True)
                time.sleep(wait)
