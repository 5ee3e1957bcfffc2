"""``autosched boards check``: connect to each board and print what it is and the target it suggests.

Also the boards options of ``autosched tune`` (``--board ALIAS`` repeatable, ``--boards FILE``):
measured from this machine, or with ``--cluster`` by the cluster's workers of those boards.
Boards are host aliases of the user's ssh configuration (``$AUTOSCHED_SSH_CONFIG`` names another
file, e.g. a test's).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..boards import (
    Board,
    BoardPool,
    BoardUnreachable,
    Connection,
    load_boards,
    probe,
    suggested_target,
)
from ..diagnostics import printable
from ..runner.measure import MeasureOption
from ..target import Target

__all__ = ["add_board_options", "board_names", "board_pool", "register", "tune_target"]


def _boards(args: argparse.Namespace) -> list[Board]:
    """The boards named by ``--boards FILE`` and ``--board ALIAS`` / positional aliases."""
    boards = load_boards(args.boards) if getattr(args, "boards", None) else []
    aliases = list(getattr(args, "board", None) or []) + list(getattr(args, "aliases", None) or [])
    boards += [Board(alias) for alias in aliases]
    return boards


def tune_target(args: argparse.Namespace) -> str:
    """The target of ``autosched tune``: ``--target``, else the one the boards file names, else ``c``.

    Boards that name another target than ``--target`` (or several targets) are refused: one run
    tunes one target.
    """
    targets = {str(Target.parse(b.target)): b.target for b in _boards(args) if b.target is not None}
    if args.target is not None:
        other = set(targets) - {str(Target.parse(args.target))}
        if other:
            wanted = targets[sorted(other)[0]]
            raise ValueError(f"a board is for target {wanted!r}, not --target {args.target!r}")
        return str(args.target)
    if len(targets) > 1:
        raise ValueError("the boards name several targets: tune one target per run (--target)")
    return next(iter(targets.values())) if targets else "c"


def board_names(args: argparse.Namespace) -> list[str]:
    """The aliases of the boards ``autosched tune`` names (``--board``, ``--boards``)."""
    return [b.name for b in _boards(args)]


def board_pool(args: argparse.Namespace, option: MeasureOption) -> BoardPool | None:
    """The pool of ``autosched tune``'s ``--board``/``--boards`` (None: tune on this machine)."""
    boards = _boards(args)
    return BoardPool(boards, option, seed=args.seed or 0) if boards else None


def cmd_check(args: argparse.Namespace) -> int:
    boards = _boards(args)
    if not boards:
        raise ValueError("name boards: autosched boards check ALIAS... or --boards FILE")
    failed = 0
    report: list[dict[str, Any]] = []
    for board in boards:
        conn = Connection(board.name)
        try:
            info = probe(conn)
        except BoardUnreachable as e:
            failed += 1
            report.append({"board": board.name, "reachable": False, "error": str(e)})
            continue
        finally:
            conn.close()
        report.append({
            "board": board.name, "reachable": True, "arch": info.arch, "cpu": info.cpu,
            "cores": info.cores, "caches": info.caches, "launcher": list(board.launcher),
            "target": board.target or suggested_target(info), "suggested_target": suggested_target(info),
        })  # fmt: skip
    if args.json:
        print(json.dumps(report))
        return 1 if failed else 0
    for entry in report:
        name = printable(entry["board"], 80)
        if not entry["reachable"]:
            print(f"{name}: unreachable: {printable(entry['error'], 400)}")
            continue
        sizes = sorted(entry["caches"].items())
        caches = ", ".join(f"{k.upper()} {v >> 10} KiB" for k, v in sizes) or "unknown"
        run_with = f" (binaries run through {' '.join(entry['launcher'])})" if entry["launcher"] else ""
        print(f"{name}: reachable")
        print(f"  arch    : {entry['arch']}{printable(run_with, 200)}")
        print(f"  cpu     : {printable(entry['cpu'], 120)}, {entry['cores']} cores")
        print(f"  caches  : {caches}")
        print(f"  target  : {printable(entry['target'], 300)}")
    return 1 if failed else 0


def add_board_options(p: argparse.ArgumentParser) -> None:
    """``--board ALIAS`` (repeatable) and ``--boards FILE`` for ``autosched tune``."""
    p.add_argument(
        "--board", action="append", metavar="ALIAS",
        help="time on this SSH host alias (repeatable: boards measure in parallel); target from --target; "
        "with --cluster: on the cluster's worker of this board (autosched worker --board ALIAS)",
    )  # fmt: skip
    p.add_argument("--boards", metavar="FILE", help="time on the boards of this boards file (TOML)")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``boards`` subcommand."""
    p = sub.add_parser("boards", help="SSH boards: check that they answer and what they are")
    actions = p.add_subparsers(dest="action", required=True)
    check = actions.add_parser("check", help="connect to boards; print arch, CPU, cores, caches, target")
    check.add_argument("aliases", nargs="*", metavar="ALIAS", help="ssh host aliases")
    check.add_argument("--boards", metavar="FILE", help="a boards file (TOML)")
    check.add_argument("--json", action="store_true", help="one JSON list on stdout")
    check.set_defaults(func=cmd_check)
