"""The ``autosched`` command (also ``python -m autosched``).

    autosched ops                          list the built-in workloads and their parameters
    autosched run WORKLOAD ARGS... [--target T] [--rounds N] [--json]
                                           build a workload's CPU schedule, check it against the
                                           numpy reference and time both side by side
    autosched space WORKLOAD ARGS... [--sample N]
                                           list the generated sketches, print sampled programs

Each subcommand lives in a module of this package with a ``register(subparsers)`` function.
Every error ends with one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys

from ..schedule import ScheduleError
from ..target import TargetError
from . import basic

#: modules whose ``register`` adds subcommands, in the order ``--help`` lists them
COMMANDS = (basic,)


def make_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    parser = argparse.ArgumentParser(prog="autosched", description="autotuning SDK for tensor programs")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS:
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv``; returns the exit status."""
    args = make_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (ValueError, TypeError, TargetError, ScheduleError, RuntimeError, AssertionError, OSError) as err:
        message = str(err).strip().splitlines()
        print(f"autosched: error: {message[0] if message else type(err).__name__}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
