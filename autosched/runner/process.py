"""Worker processes that never re-run the caller: fresh interpreters fed over a socket.

A worker is started as ``python -c <boot> MODULE FD PARENT_PID``: a new interpreter that imports
only autosched (from the same place as the parent did, whatever the current directory holds) and
calls ``MODULE.serve(conn)``. It never imports the caller's ``__main__``, so flat scripts without a
main guard, ``python -c``, code fed on stdin and notebook cells all work, unlike with
``multiprocessing``'s spawn method, which re-runs the main script in every child.

Everything a worker needs travels as pickled data over the socket (``multiprocessing``'s
``Connection`` framing): sources, library paths, arrays, argument specs.

Nothing is left behind: a worker polls its parent's pid and exits as soon as the parent is gone
(killed by SIGKILL included), after running its ``cleanup`` hooks; it ignores SIGINT, so Ctrl-C in
a terminal reaches only the caller, which then stops its workers.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from .errors import InfrastructureError

__all__ = ["WorkerError", "WorkerProcess", "on_parent_exit"]

#: the directory that holds the ``autosched`` package the parent imported
_ROOT = str(Path(__file__).resolve().parents[2])

#: seconds between two looks at the parent's pid
_POLL = 0.2

_BOOT = (
    "import sys; sys.path[0] = sys.argv[1]; "  # replace the current directory: no shadowing modules
    "from autosched.runner.process import _boot; _boot(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))"
)

_exit_hooks: list[Callable[[], None]] = []


class WorkerError(InfrastructureError):
    """A worker process could not be started or stopped answering (an infrastructure failure)."""


def on_parent_exit(hook: Callable[[], None]) -> None:
    """Run ``hook`` (in the worker) when the parent is found gone, before the worker exits."""
    _exit_hooks.append(hook)


def _watch_parent(parent_pid: int) -> None:
    """Exit the worker once ``parent_pid`` is no longer its parent (the parent died)."""
    while os.getppid() == parent_pid:
        time.sleep(_POLL)
    for hook in _exit_hooks:
        with contextlib.suppress(Exception):
            hook()
    os._exit(0)


def _boot(module: str, fd: int, parent_pid: int) -> None:
    """The worker's entry point: watch the parent, then serve requests on socket ``fd``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when its workers stop
    if os.getppid() != parent_pid:
        return
    threading.Thread(target=_watch_parent, args=(parent_pid,), name="watch-parent", daemon=True).start()
    serve = importlib.import_module(module).serve
    with Connection(fd) as conn:
        serve(conn)


class WorkerProcess:
    """One worker: ``python`` running ``module.serve(conn)``, with its end of the socket.

    ``WorkerProcess("autosched.runner.measure_worker")`` starts it and waits for its first message
    (``("ready",)``) for up to ``start_timeout`` seconds; :attr:`conn` is then the parent's end.
    """

    def __init__(self, module: str, name: str, start_timeout: float = 120.0) -> None:
        self.name = name
        parent, child = socket.socketpair()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _BOOT, _ROOT, module, str(child.fileno()), str(os.getpid())],
                pass_fds=(child.fileno(),),
                stdin=subprocess.DEVNULL,
            )
        except OSError as e:
            parent.close()
            raise WorkerError(f"cannot start the {name} worker ({sys.executable}): {e}") from None
        finally:
            child.close()
        self.conn = Connection(parent.detach())
        if not self.conn.poll(start_timeout):
            self.kill()
            raise WorkerError(f"the {name} worker did not start within {start_timeout:g} s")
        try:
            hello = self.conn.recv()
        except (EOFError, OSError):
            why = self.death()
            raise WorkerError(f"the {name} worker failed to start ({why}); see its messages above") from None
        if hello != ("ready",):
            self.kill()
            raise WorkerError(f"the {name} worker said {hello!r} instead of ready")

    def alive(self) -> bool:
        """Whether the process is still running."""
        return self.proc.poll() is None

    def send(self, message: Any) -> None:
        """Send one message (raises OSError if the worker is gone)."""
        self.conn.send(message)

    def death(self) -> str:
        """How the worker ended, after its socket closed: ``SIGSEGV``, ``exit code 3``, ..."""
        try:
            code = self.proc.wait(5)
        except subprocess.TimeoutExpired:
            code = None
        self.kill()
        if code is None:
            return "socket closed"
        if code < 0:
            try:
                return signal.Signals(-code).name
            except ValueError:
                return f"signal {-code}"
        return f"exit code {code}"

    def stop(self, message: Any = ("stop",), wait: float = 5.0) -> None:
        """Ask the worker to stop, wait up to ``wait`` seconds, then kill it."""
        if self.alive():
            with contextlib.suppress(OSError):
                self.conn.send(message)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(wait)
        self.kill()

    def kill(self) -> None:
        """SIGKILL the worker if it runs, reap it and close the socket."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.conn.close()
