"""``autosched worker --scheduler ADDRESS [--device local | --gpu N | --board ALIAS]``: join a Dask
cluster. Also the TLS options of ``autosched worker`` and ``autosched tune --cluster``."""

from __future__ import annotations

import argparse
from typing import Any

from ..boards import Board, load_boards
from ..cluster.connection import tls_security
from ..cluster.dask_worker import plan, run_board_worker, run_worker

__all__ = ["add_tls_options", "register", "security_of"]


def security_of(args: argparse.Namespace, role: str) -> Any:
    """The TLS settings of ``--tls-ca-file``, ``--tls-cert``, ``--tls-key`` (None: Dask's config)."""
    return tls_security(args.tls_ca_file, args.tls_cert, args.tls_key, role)


def _board(alias: str, boards_file: str | None) -> Board:
    """The board ``alias``: its entry in ``boards_file`` if given, else the bare alias."""
    if boards_file is None:
        return Board(alias)
    for board in load_boards(boards_file):
        if board.name == alias:
            return board
    raise ValueError(f"board {alias!r} is not in the boards file {boards_file}")


def cmd_worker(args: argparse.Namespace) -> int:
    """Start a worker that builds, or that measures on one device or board, until it is stopped."""
    security = security_of(args, "worker")
    if args.board is not None:
        run_board_worker(args.scheduler, _board(args.board, args.boards), args.listen, args.name, security)
        return 0
    if args.boards is not None:
        raise ValueError("--boards names the file of --board ALIAS: give --board too")
    the_plan = plan(args.device, args.gpu, args.nthreads)
    run_worker(args.scheduler, the_plan, listen=args.listen, name=args.name, security=security)
    return 0


def add_tls_options(p: argparse.ArgumentParser) -> None:
    """``--tls-ca-file``, ``--tls-cert``, ``--tls-key``: TLS with a ``tls://`` scheduler."""
    p.add_argument("--tls-ca-file", metavar="FILE", help="TLS: the CA certificate (PEM) of a tls:// cluster")
    p.add_argument("--tls-cert", metavar="FILE", help="TLS: this process's certificate (PEM)")
    p.add_argument("--tls-key", metavar="FILE", help="TLS: its private key (PEM; default: in --tls-cert)")


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
    device.add_argument(
        "--board", metavar="ALIAS",
        help="measure on this SSH board (a host alias of ~/.ssh/config), one program at a time",
    )  # fmt: skip
    p.add_argument("--boards", metavar="FILE", help="the boards file (TOML) with --board's entry")
    p.add_argument("--nthreads", type=int, help="builds at once on a build worker (default: one per core)")
    p.add_argument(
        "--listen", "--host", dest="listen", metavar="ADDRESS",
        help="the address this worker listens on (default: this machine's address that reaches the "
        "scheduler, 127.0.0.1 for a scheduler on this machine; --host is an alias)",
    )  # fmt: skip
    p.add_argument("--name", help="the worker's name in the cluster")
    add_tls_options(p)
    p.set_defaults(func=cmd_worker)
