"""``autosched worker --scheduler ADDRESS [--device local | --gpu N]``: join a Dask cluster."""

from __future__ import annotations

import argparse

from ..cluster.worker import plan, run_worker


def cmd_worker(args: argparse.Namespace) -> int:
    """Start a worker that builds, or that measures on one device, until it is stopped."""
    the_plan = plan(args.device, args.gpu, args.nthreads)
    run_worker(args.scheduler, the_plan, host=args.host, name=args.name)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``worker`` subcommand."""
    p = sub.add_parser(
        "worker", help="join a Dask cluster: build, or measure on one device (trusted clusters only)"
    )
    p.add_argument("--scheduler", required=True, metavar="ADDRESS", help="the scheduler, tcp://HOST:PORT")
    device = p.add_mutually_exclusive_group()
    device.add_argument(
        "--device", metavar="local", help="measure on this machine's CPU, one program at a time"
    )
    device.add_argument("--gpu", type=int, metavar="N", help="measure on GPU N, one program at a time")
    p.add_argument("--nthreads", type=int, help="builds at once on a build worker (default: one per core)")
    p.add_argument("--host", help="the address this worker listens on (default: Dask's choice)")
    p.add_argument("--name", help="the worker's name in the cluster")
    p.set_defaults(func=cmd_worker)
