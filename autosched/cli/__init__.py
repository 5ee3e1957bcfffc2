"""The ``autosched`` command (also ``python -m autosched``).

    autosched --version                    the version; autosched SUBCOMMAND --help: its options, defaults
    autosched ops                          list the built-in workloads and their parameters
    autosched run WORKLOAD ARGS... [--target T] [--threads N] [--rounds N] [--json]
                                           build a workload's CPU schedule, check it against the
                                           numpy reference and time both side by side
    autosched run MODEL.onnx [--log LOG] [--against onnxruntime|none] [--threads N] [--rtol R]
                   [--rounds N] [--json]   build the network, check it against onnxruntime (exit 1
                                           beyond --rtol) and time both on the same threads
    autosched space WORKLOAD ARGS... [--sample N]
                                           list the generated sketches, print sampled programs
    autosched tune WORKLOAD ARGS... [--target T] [--trials N] [--log FILE | --db DIR] [--tuner NAME]
                   [--space sketch|template|auto] [--seed S] [--json]
                                           tune: measure programs, log every trial, resume
    autosched best LOG [--workload W ARGS...] [--target T] [--json]
                                           the best program per workload and target of a log
    autosched export LOG --out DIR [--workload W ARGS...] [--target T] [--name C] [--portable]
                   [--force]               the best program as kernel.c/.h, main.c and a Makefile
                                           (into a new or empty DIR unless --force)
    autosched export LOG --embedded --target BARE_METAL --out DIR [--workload W ARGS...] [--static]
                                           the log's best program (any target's) re-targeted for
                                           a microcontroller: no heap, no OS; sizes, board check;
                                           MODEL.onnx in place of LOG (and --log LOG): a network
    autosched export MODEL.onnx [--log LOG] --out DIR [--portable] [--weights auto|c|blob]
                                           the whole network as one C library (model.c/.h), its
                                           weights in weights.bin above 1 MiB (auto)
    autosched report LOG [--out FILE.png]  a table of the log and its tuning curves as a PNG
    autosched tasks MODEL.onnx [--json]    a model's tasks: fused workloads, FLOPs, weights, shares
    autosched tune MODEL.onnx [--trials N] [--log FILE] [--scheduler gradient|round-robin]
                                           tune all of a model's tasks into one log
    autosched tune ... --board ALIAS [--board ALIAS2] | --boards FILE
                                           time on ARM boards over SSH (cross-compiled here)
    autosched boards check [ALIAS... | --boards FILE] [--json]
                                           connect to boards: arch, CPU, cores, caches, target
    autosched tune ... --cluster tcp://HOST:PORT [--board ALIAS] [--tls-ca-file F --tls-cert F --tls-key F]
                                           build and measure on a Dask cluster (tls://: with TLS)
    autosched worker --scheduler ADDRESS [--device local | --gpu N | --board ALIAS [--boards FILE]]
                                           join a Dask cluster: build, or measure on one device
                                           or one SSH board
    autosched db list|best|export|gc [--db DIR]
                                           the tuning database: what it holds, its best programs,
                                           a kernel exported from it, distilling it

Each subcommand lives in a module of this package with a ``register(subparsers)`` function.
Every error ends with one line on stderr and exit status 2, never a traceback. Text that comes
from a log is made printable before it reaches the terminal (no escape code is ever obeyed).
"""

from __future__ import annotations

import argparse
import re
import signal
import sys
import threading
from typing import Any

from ..diagnostics import printable
from ..records import NoRecordError
from ..schedule import ScheduleError
from ..target import TargetError
from ..version import __version__
from . import basic, boards, db, logs, network, tune, worker

#: modules whose ``register`` adds subcommands, in the order ``--help`` lists them
COMMANDS = (basic, tune, network, logs, db, boards, worker)

#: exceptions that mean bad input or a missing tool or package: one line on stderr, exit status 2
USER_ERRORS = (
    ValueError,
    TypeError,
    TargetError,
    ScheduleError,
    RuntimeError,
    AssertionError,
    OSError,
    ImportError,
    NoRecordError,
)


class _Help(argparse.HelpFormatter):
    """Help that ends each option's text with its default, unless it has none (None, False) or the
    text already says it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if not action.option_strings or action.default in (None, False, argparse.SUPPRESS):
            return text
        if "%(default)" in text or re.search(r"\bdefault\b", text, re.IGNORECASE):
            return text
        return f"{text} (default: %(default)s)"


class _Parser(argparse.ArgumentParser):
    """An argument parser whose help shows defaults; its subcommands' parsers are of this class too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Help)
        super().__init__(*args, **kwargs)


def make_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    parser = _Parser(prog="autosched", description="autotuning SDK for tensor programs")
    parser.add_argument("--version", action="version", version=f"autosched {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS:
        module.register(sub)
    return parser


def _terminate(signum: int, frame: object) -> None:
    """SIGTERM handler: stop like Ctrl-C, so that workers are stopped and the log is closed."""
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv``; returns the exit status."""
    args = make_parser().parse_args(argv)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminate)
    try:
        return int(args.func(args))
    except USER_ERRORS as err:
        message = str(err).strip().splitlines()
        text = printable(message[0], limit=2000) if message else type(err).__name__
        print(f"autosched: error: {text}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as stop:
        print(f"\nautosched: interrupted: {stop or 'stopped'}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
