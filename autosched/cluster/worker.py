"""``autosched worker``: a Dask worker set up to build, or to measure on one device.

A measuring worker (``device="local"``: this machine's CPU; ``gpu=N``: GPU ``N``) declares the
resource ``measure-KIND`` once, runs one task at a time and so never builds while it measures; a
build worker declares ``build`` with one thread per core. The same can be had with ``dask worker
ADDRESS --nthreads 1 --resources measure-c=1`` (see the README).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

from .connection import BUILD, check_address, import_distributed, measure_resource

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
        return WorkerPlan({measure_resource("c"): 1}, 1, {})
    if gpu is not None:
        if gpu < 0:
            raise ValueError(f"--gpu takes a GPU number (0, 1, ...), got {gpu}")
        resources = {measure_resource("cuda"): 1, measure_resource("opencl"): 1}
        return WorkerPlan(resources, 1, {"CUDA_VISIBLE_DEVICES": str(gpu)})
    return WorkerPlan({BUILD: 1}, nthreads or len(os.sched_getaffinity(0)), {})


def run_worker(
    scheduler: str, the_plan: WorkerPlan, host: str | None = None, name: str | None = None
) -> None:
    """Run a Dask worker (no nanny: killing this process removes the worker) until the scheduler
    goes away or the process is stopped; a scheduler not reached within ``CONNECT_TIMEOUT``
    seconds is a ``TimeoutError``."""
    check_address(scheduler)
    distributed = import_distributed()
    os.environ.update(the_plan.env)

    async def serve() -> None:
        async with distributed.Worker(
            scheduler, nthreads=the_plan.nthreads, resources=the_plan.resources, host=host, name=name,
            dashboard=False, death_timeout=CONNECT_TIMEOUT,
        ) as worker:
            await worker.finished()

    asyncio.run(serve())
