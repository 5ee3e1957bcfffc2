"""A real OpenSSH server on 127.0.0.1 standing in for a board, for the remote runner's tests.

Each :class:`SshServer` has its own sshd_config, host key and port; :class:`SshLab` holds the user
key and writes an ``ssh_config`` with one ``Host`` alias per server, as a user's ``~/.ssh/config``
would. sshd runs in the foreground (``-D``) and is stopped by its PID; :meth:`SshServer.kill`
also kills the connections it serves (a board that drops off the network). When the tests run as
root, the board login is a plain ``/bin/sh`` user (root's shell start-up here costs ~300 ms per
command); otherwise it is the current user.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"

#: the board login used when the tests run as root (created once, a system user with /bin/sh)
BOARD_USER = "asc-board"
BOARD_HOME = Path("/tmp/asc-board-home")


def board_user() -> str:
    """The login of the stand-in boards: :data:`BOARD_USER` when root (created if missing), else
    the current user."""
    if os.getuid() != 0:
        return pwd.getpwuid(os.getuid()).pw_name
    try:
        pwd.getpwnam(BOARD_USER)
    except KeyError:  # password "*": no password login, but not a locked account (sshd refuses those)
        home = ["--home-dir", str(BOARD_HOME)]
        made = subprocess.run(["useradd", "--system", "--shell", "/bin/sh", *home, "-p", "*", BOARD_USER],
                              capture_output=True, text=True)  # fmt: skip
        if made.returncode not in (0, 9):  # 9: made meanwhile by a parallel test worker
            raise RuntimeError(f"useradd failed: {made.stderr.strip()}") from None
    BOARD_HOME.mkdir(exist_ok=True)
    entry = pwd.getpwnam(BOARD_USER)
    os.chown(BOARD_HOME, entry.pw_uid, entry.pw_gid)
    return BOARD_USER


def _keygen(path: Path) -> str:
    """Make an ed25519 key pair at ``path``; the public key's text."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path.with_suffix(".pub").read_text().strip()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _descendants(pid: int) -> list[int]:
    """The processes below ``pid`` (read from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def processes_in(directory: str) -> list[int]:
    """The pids of processes whose current directory is ``directory`` (read from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if os.readlink(entry / "cwd") == directory:
                    found.append(int(entry.name))
    return found


class SshServer:
    """One sshd on 127.0.0.1 with its own host key and port (started by :meth:`start`)."""

    def __init__(self, directory: Path, authorized_keys: Path, user: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.dir = directory
        self.port = _free_port()
        self.host_key_path = directory / "host_key"
        self.host_key = _keygen(self.host_key_path)
        self.config = directory / "sshd_config"
        self.config.write_text(
            f"ListenAddress 127.0.0.1\nPort {self.port}\nHostKey {self.host_key_path}\n"
            f"PidFile {directory / 'sshd.pid'}\nUsePAM no\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nPubkeyAuthentication yes\n"
            f"AuthorizedKeysFile {authorized_keys}\nStrictModes no\nAllowUsers {user}\n"
            "Subsystem sftp internal-sftp\nMaxSessions 50\nMaxStartups 50\nLogLevel ERROR\n"
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start sshd and wait until it accepts connections."""
        if os.getuid() == 0:
            Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation directory
        log = (self.dir / "sshd.log").open("ab")
        self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(self.config)], stderr=log, stdout=log)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 0.2):
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited: {(self.dir / 'sshd.log').read_text()[-500:]}")
            time.sleep(0.05)
        raise RuntimeError("sshd did not start listening within 10 s")

    def kill(self) -> None:
        """Stop sshd and every connection it serves (SIGKILL, by PID)."""
        if self.proc is None:
            return
        for pid in [*_descendants(self.proc.pid), self.proc.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait()
        self.proc = None


class SshLab:
    """A user key, sshd servers and the ssh_config naming them (``board1``, ``board2``, ...)."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.dir = directory
        self.user = board_user()
        self.key = directory / "id_ed25519"
        # sshd reads it as the board user: as root, put it where that user can read it
        keys_dir = BOARD_HOME if os.getuid() == 0 else directory
        self.token = secrets.token_hex(4)  # names this lab's files outside its directory
        self.authorized = keys_dir / f"authorized_keys-{self.token}"
        self.authorized.write_text(_keygen(self.key) + "\n")
        self.authorized.chmod(0o644)
        self.servers: dict[str, SshServer] = {}
        self.ssh_config = directory / "ssh_config"
        self._entries: list[str] = []

    def add(self, alias: str, *, known_key: str | None = None) -> SshServer:
        """Start a server reachable as ``alias``; ``known_key`` puts another key in known_hosts
        for it (a board whose host key changed)."""
        server = SshServer(self.dir / alias, self.authorized, self.user)
        server.start()
        self.servers[alias] = server
        known = self.dir / f"known_hosts_{alias}"
        known.write_text(f"[127.0.0.1]:{server.port} {known_key or server.host_key}\n")
        self._entries.append(
            f"Host {alias}\n  HostName 127.0.0.1\n  Port {server.port}\n  User {self.user}\n"
            f"  IdentityFile {self.key}\n  IdentitiesOnly yes\n  UserKnownHostsFile {known}\n"
            "  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n  LogLevel ERROR\n"
        )
        self.ssh_config.write_text("\n".join(self._entries))
        return server

    def workdir(self, name: str) -> str:
        """A fresh working directory for a board entry, writable by the board user."""
        home = BOARD_HOME if os.getuid() == 0 else self.dir
        return str(home / f"lab-{self.token}-{name}")

    def close(self) -> None:
        """Stop every server."""
        for server in self.servers.values():
            server.kill()
        self.authorized.unlink(missing_ok=True)
        for workdir in BOARD_HOME.glob(f"lab-{self.token}-*"):
            shutil.rmtree(workdir, ignore_errors=True)


@contextlib.contextmanager
def running_lab(directory: Path, *aliases: str) -> Iterator[SshLab]:
    """An :class:`SshLab` in ``directory`` with a started server per alias, stopped at the end."""
    lab = SshLab(directory)
    try:
        for alias in aliases:
            lab.add(alias)
        yield lab
    finally:
        lab.close()
