"""``autosched worker``: a Dask worker set up to build, or to measure on one device or SSH board.

A measuring worker (``device="local"``: this machine's CPU; ``gpu=N``: GPU ``N``) declares the
resource ``measure-KIND`` once, runs one task at a time and so never builds while it measures; a
build worker declares ``build`` with one thread per core. The same can be had with ``dask worker
ADDRESS --nthreads 1 --resources measure-c=1`` (see the README). A board worker
(:func:`run_board_worker`) opens its board's SSH session first, declares ``measure-c-ARCH`` and
``board-ALIAS`` (:mod:`.board_work`), measures one program at a time, and closes the session when
it stops; it has no ``dask worker`` equivalent.

A worker listens on one address only (:mod:`.listen`): ``--listen ADDRESS``, else the local address
that reaches its scheduler (loopback for a scheduler on this machine), never on every interface.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from dataclasses import dataclass
from typing import Any

from ..backends import backends, gpu_kinds
from ..boards import Board
from .board_work import board_resources, close_board, open_board
from .connection import BUILD, check_address, import_distributed, measure_resource
from .listen import listen_address, warn_if_exposed

#: seconds a worker tries to reach its scheduler before it gives up
CONNECT_TIMEOUT = 60.0


@dataclass(frozen=True)
class WorkerPlan:
    """What a worker declares: its resources, its threads, and environment settings."""

    resources: dict[str, int]
    nthreads: int
    env: dict[str, str]


def plan(device: str | None = None, gpu: int | None = None, nthreads: int | None = None) -> WorkerPlan:
    """The resources and threads of a worker that measures ``device`` (only ``local``) or GPU
    ``gpu``, or (neither) builds with ``nthreads`` threads (default: one per core)."""
    if device is not None and gpu is not None:
        raise ValueError("a worker measures one device: give --device or --gpu, not both")
    if device is not None:
        if device != "local":
            raise ValueError(f"unknown device {device!r}: only 'local' (this machine's CPU) is supported")
        return WorkerPlan({measure_resource(b.kind): 1 for b in backends() if not b.gpu}, 1, {})
    if gpu is not None:
        if gpu < 0:
            raise ValueError(f"--gpu takes a GPU number (0, 1, ...), got {gpu}")
        resources = {measure_resource(kind): 1 for kind in gpu_kinds()}
        return WorkerPlan(resources, 1, {"CUDA_VISIBLE_DEVICES": str(gpu)})
    return WorkerPlan({BUILD: 1}, nthreads or len(os.sched_getaffinity(0)), {})


def run_worker(
    scheduler: str, the_plan: WorkerPlan, listen: str | None = None, name: str | None = None,
    security: Any = None,
) -> None:
    """Run a Dask worker (no nanny: killing this process removes the worker) until the scheduler
    goes away or the process is stopped; a scheduler not reached within ``CONNECT_TIMEOUT``
    seconds is a ``TimeoutError``. It listens on ``listen``, else on the local address that reaches
    the scheduler (:func:`~.listen.listen_address`), and warns in one line when that is not a
    loopback address and the scheduler is not ``tls://``. ``security``: TLS settings for a
    ``tls://`` scheduler (None: Dask's configuration)."""
    check_address(scheduler)
    distributed = import_distributed()
    host = listen_address(scheduler, listen)
    warn_if_exposed(scheduler, host)
    os.environ.update(the_plan.env)

    async def serve() -> None:
        async with distributed.Worker(
            scheduler, nthreads=the_plan.nthreads, resources=the_plan.resources, host=host, name=name,
            dashboard=False, death_timeout=CONNECT_TIMEOUT, security=security,
        ) as worker:
            await worker.finished()

    asyncio.run(serve())


def run_board_worker(
    scheduler: str, board: Board, listen: str | None = None, name: str | None = None, security: Any = None
) -> None:
    """Run a worker that measures on ``board`` (see :func:`run_worker`, also for ``listen``): its
    session is opened before the worker joins (an unreachable board is ``BoardUnreachable``) and
    closed when it stops."""
    check_address(scheduler)
    where = listen_address(scheduler, listen)  # a bad address fails before the board's session opens
    info = open_board(board)
    try:
        the_plan = WorkerPlan(board_resources(board, info), 1, {})
        run_worker(scheduler, the_plan, where, name or board.name, security)
    finally:
        started = time.monotonic()
        close_board()
        took = time.monotonic() - started
        said = f"autosched worker: board {board.name}: session closed in {took:.1f} s"
        print(said, file=sys.stderr, flush=True)
