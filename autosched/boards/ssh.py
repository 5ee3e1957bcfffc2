"""An SSH connection to a board, through the system's OpenSSH client.

A :class:`Connection` runs POSIX shell scripts on a host alias of the user's ``~/.ssh/config`` (or of
the file ``ssh_config`` names, e.g. a test's), so keys, agents, ``ProxyJump``, ports and users work
as they do for ``ssh ALIAS``. Commands are argv lists (no local shell); the remote script is one
word handed to ``sh -c`` on the board, and every value put into a script goes through
:func:`shlex.quote`. Host keys are checked as the user's configuration says: autosched adds
``BatchMode=yes`` (never a password prompt) and connection sharing, never ``StrictHostKeyChecking``.

Connection sharing: the first command opens a master connection (``ControlMaster=auto``) whose
socket lies in a private temporary directory; later commands reuse it (a round trip instead of a
handshake) and it lives ``ControlPersist`` seconds after the last one. :meth:`Connection.close`
ends it and removes the directory.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

from ..diagnostics import printable
from ..runner.errors import InfrastructureError

__all__ = ["BoardUnreachable", "Connection", "HostKeyRefused", "Reply", "SSH_CONFIG_ENV"]

#: environment variable naming an ssh_config file to use instead of ``~/.ssh/config`` (tests)
SSH_CONFIG_ENV = "AUTOSCHED_SSH_CONFIG"

#: seconds the shared connection stays open after its last command
CONTROL_PERSIST = 120

#: seconds ssh may take to set up a new connection
CONNECT_TIMEOUT = 10

#: what ssh says when the host key does not match the known one (or is unknown in batch mode)
_HOST_KEY_SIGNS = ("Host key verification failed", "REMOTE HOST IDENTIFICATION HAS CHANGED")


class BoardUnreachable(InfrastructureError):
    """A board could not be reached or stopped answering (the board's fault, never the program's)."""


class HostKeyRefused(BoardUnreachable):
    """ssh refused the board's host key: it is unknown, or it changed (a different machine answers)."""


@dataclass(frozen=True, slots=True)
class Reply:
    """What a remote script gave back: its exit status, standard output and error."""

    status: int
    stdout: bytes
    stderr: bytes


def _last_line(data: bytes) -> str:
    lines = [line for line in data.decode(errors="replace").splitlines() if line.strip()]
    return printable(lines[-1], limit=300) if lines else "no message"


class Connection:
    """Run scripts on the board ``alias`` (a host of the ssh configuration).

    ``ssh_config`` is a configuration file used instead of ``~/.ssh/config`` (default: the file
    ``$AUTOSCHED_SSH_CONFIG`` names, if set); ``share`` turns connection sharing off when False
    (every command then pays a full handshake: the benchmark's baseline).
    """

    def __init__(self, alias: str, ssh_config: str | None = None, share: bool = True) -> None:
        if not alias or alias.startswith("-") or any(c.isspace() for c in alias):
            raise ValueError(f"bad board alias {printable(alias, 80)!r}: expected a host name of ssh_config")
        self.alias = alias
        self.ssh_config = ssh_config if ssh_config is not None else os.environ.get(SSH_CONFIG_ENV) or None
        self.share = share
        self._dir: str | None = None  # private directory of the control socket

    def _base(self) -> list[str]:
        ssh = shutil.which("ssh")
        if ssh is None:
            raise BoardUnreachable("the ssh client is not installed: apt-get install openssh-client")
        argv = [ssh, "-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT}"]
        argv += ["-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"]
        if self.ssh_config:
            argv += ["-F", self.ssh_config]
        if self.share:
            if self._dir is None:
                self._dir = tempfile.mkdtemp(prefix="autosched-ssh-")  # mode 0700: only this user
            argv += ["-o", "ControlMaster=auto", "-o", f"ControlPersist={CONTROL_PERSIST}"]
            argv += ["-o", f"ControlPath={self._dir}/%C"]
        return argv

    def run(self, script: str, stdin: bytes = b"", timeout: float = 60.0) -> Reply:
        """Run the POSIX shell ``script`` on the board with ``stdin``; its :class:`Reply`.

        Raises :class:`HostKeyRefused` when ssh refuses the host key, :class:`BoardUnreachable`
        when ssh cannot connect or the connection drops (ssh's status 255), or when no answer
        comes within ``timeout`` seconds. The script's own status is in the reply.
        """
        argv = [*self._base(), "-T", "--", self.alias, "sh -c " + shlex.quote(script)]
        try:
            done = subprocess.run(argv, input=stdin, capture_output=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise BoardUnreachable(f"board {self.alias}: no answer within {timeout:g} s") from None
        except OSError as e:
            raise BoardUnreachable(f"board {self.alias}: cannot run ssh: {e}") from None
        if done.returncode == 255:
            text = done.stderr.decode(errors="replace")
            if any(sign in text for sign in _HOST_KEY_SIGNS):
                raise HostKeyRefused(
                    f"board {self.alias}: ssh refused its host key ({_last_line(done.stderr)}); if the "
                    "board was reinstalled, check the new key and update known_hosts"
                )
            raise BoardUnreachable(f"board {self.alias}: ssh failed: {_last_line(done.stderr)}")
        return Reply(done.returncode, done.stdout, done.stderr)

    def close(self) -> None:
        """End the shared connection (if any) and remove its socket directory."""
        if self._dir is None:
            return
        argv = [*self._base(), "-O", "exit", "--", self.alias]
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(argv, capture_output=True, timeout=10, check=False)
        shutil.rmtree(self._dir, ignore_errors=True)
        self._dir = None
