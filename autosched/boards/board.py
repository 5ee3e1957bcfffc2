"""Boards: SSH destinations that time candidates, named in a boards file or on the command line.

A boards file (TOML) lists boards::

    [[board]]
    name = "rpi4"                                  # a Host alias of ~/.ssh/config
    target = "c -cc=aarch64-linux-gnu-gcc -mcpu=cortex-a72"
    workdir = "/tmp/autosched"                     # optional (default: ~/.cache/autosched-board)
    launcher = ["qemu-aarch64"]                    # optional: a command prefix that runs the
                                                   # target's binaries there (an emulator)

``launcher`` exists for stand-ins: a machine of another architecture that runs the board's
binaries through an emulator (``qemu-aarch64``, user mode) instead of a real board. Without one,
candidates of an architecture the board does not run are refused before they are sent (a board
whose kernel runs them itself through binfmt_misc takes ``launcher = ["env"]``). A launcher
given as one string is split into words as a shell would (``"qemu-arm -L /usr/arm"``).

:func:`probe` reads what a board is (architecture, CPU model, cores, caches) from
``/proc/cpuinfo``, ``getconf`` and ``/sys/devices/system/cpu``; :func:`suggested_target` turns
that into a target string.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..database.machine import fingerprint
from ..diagnostics import printable
from ..hardware import cpu_model, isa_extensions, normalize_arch, parse_cpuinfo, parse_size
from ..target import Target
from .ssh import Connection

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser as the tomli package
    tomllib = None  # type: ignore[assignment]

__all__ = ["Board", "BoardInfo", "load_boards", "probe", "suggested_target"]

#: the working directory on a board when its entry names none (relative: under the login's home)
DEFAULT_WORKDIR = ".cache/autosched-board"

#: cross compilers by board architecture (for the suggested target)
_COMPILERS = {"aarch64": "aarch64-linux-gnu-gcc", "arm": "arm-linux-gnueabihf-gcc", "x86_64": "gcc"}

#: ARM CPU part numbers (``CPU part`` of /proc/cpuinfo, implementer 0x41) -> -mcpu names
_ARM_PARTS = {
    "0xd03": "cortex-a53", "0xd04": "cortex-a35", "0xd05": "cortex-a55", "0xd07": "cortex-a57",
    "0xd08": "cortex-a72", "0xd09": "cortex-a73", "0xd0a": "cortex-a75", "0xd0b": "cortex-a76",
    "0xd0c": "neoverse-n1", "0xd0d": "cortex-a77", "0xd40": "neoverse-v1", "0xd41": "cortex-a78",
    "0xd49": "neoverse-n2", "0xd4f": "neoverse-v2", "0xc07": "cortex-a7", "0xc0f": "cortex-a15",
}  # fmt: skip

PROBE_SCRIPT = r"""
echo "== arch"; uname -m
echo "== cores"; getconf _NPROCESSORS_ONLN 2>/dev/null || grep -c ^processor /proc/cpuinfo
echo "== caches"
for d in /sys/devices/system/cpu/cpu0/cache/index*; do
  [ -d "$d" ] && echo "$(cat "$d/level") $(cat "$d/type") $(cat "$d/size")"
done
echo "== cpuinfo"; cat /proc/cpuinfo
"""


@dataclass(frozen=True, slots=True)
class Board:
    """One board: its ssh alias, its target (None: given elsewhere), a working directory and an
    optional launcher (an emulator command prefix)."""

    name: str
    target: str | None = None
    workdir: str = DEFAULT_WORKDIR
    launcher: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        Connection(self.name)  # checks the alias's form
        if self.target is not None:
            Target.parse(self.target)
        if not self.workdir or self.workdir.startswith("-") or any(c in self.workdir for c in "\0\n"):
            raise ValueError(f"board {self.name}: bad workdir {printable(self.workdir, 80)!r}")


def _entry(raw: Any, where: str) -> Board:
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: expected a table with name, target, workdir, launcher")
    unknown = set(raw) - {"name", "target", "workdir", "launcher"}
    if unknown:
        raise ValueError(f"{where}: unknown keys {', '.join(sorted(map(str, unknown)))}")
    name, target = raw.get("name"), raw.get("target")
    workdir, launcher = raw.get("workdir", DEFAULT_WORKDIR), raw.get("launcher", [])
    if not isinstance(name, str):
        raise ValueError(f"{where}: name must be a string (an ssh host alias)")
    if target is not None and not isinstance(target, str):
        raise ValueError(f"{where}: target must be a target string")
    if not isinstance(workdir, str):
        raise ValueError(f"{where}: workdir must be a string")
    if isinstance(launcher, str):
        try:
            launcher = shlex.split(launcher)
        except ValueError as e:
            raise ValueError(f"{where}: cannot read launcher: {e}") from None
    if not isinstance(launcher, list) or not all(isinstance(w, str) and w for w in launcher):
        raise ValueError(f"{where}: launcher must be a list of words, e.g. [\"qemu-aarch64\"]")
    return Board(name, target, workdir, tuple(launcher))


def load_boards(path: str | Path) -> list[Board]:
    """The boards of a boards file (see the module docstring); ``ValueError`` names what is wrong."""
    if tomllib is None:
        raise ImportError("reading a boards file needs Python 3.11 (tomllib)")
    try:
        data = tomllib.loads(Path(path).read_text())
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"boards file {path}: {e}") from None
    except OSError as e:
        raise ValueError(f"boards file {path}: cannot read it: {e.strerror or e}") from None
    entries = data.get("board")
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"boards file {path}: no [[board]] entries")
    boards = [_entry(raw, f"boards file {path}, board {i + 1}") for i, raw in enumerate(entries)]
    names = [b.name for b in boards]
    if len(set(names)) != len(names):
        raise ValueError(f"boards file {path}: a board is listed twice")
    return boards


@dataclass(frozen=True)
class BoardInfo:
    """What :func:`probe` read from a board."""

    arch: str
    cpu: str
    cores: int
    caches: dict[str, int] = field(default_factory=dict)  # "l1", "l2", "l3" -> bytes
    isa: tuple[str, ...] = ()
    mcpu: str | None = None

    def description(self, launcher: tuple[str, ...] = ()) -> dict[str, Any]:
        """The machine description whose :func:`~autosched.database.machine.fingerprint` records get."""
        return {"kind": "board", "arch": self.arch, "cpu": self.cpu, "isa": list(self.isa),
                "cores": self.cores, "launcher": list(launcher)}  # fmt: skip

    def fingerprint(self, launcher: tuple[str, ...] = ()) -> str:
        """``<arch>-<hash>`` of :meth:`description`."""
        return fingerprint(self.description(launcher))


def _sections(text: str) -> dict[str, str]:
    parts = re.split(r"^== (\w+)\n", text, flags=re.MULTILINE)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def parse_probe(text: str) -> BoardInfo:
    """A :class:`BoardInfo` from the probe script's output."""
    sec = _sections(text)
    info = parse_cpuinfo(sec.get("cpuinfo", ""))
    caches: dict[str, int] = {}
    for line in sec.get("caches", "").splitlines():
        words = line.split()
        if len(words) == 3 and words[1] in ("Data", "Unified") and words[0] in "123":
            try:
                caches[f"l{words[0]}"] = parse_size(words[2])
            except ValueError:
                continue
    try:
        cores = int(sec.get("cores", "").split()[0])
    except (IndexError, ValueError):
        cores = 1
    arch = normalize_arch(sec.get("arch", "unknown").strip() or "unknown")
    mcpu = _ARM_PARTS.get(info.get("CPU part", "")) if info.get("CPU implementer") == "0x41" else None
    return BoardInfo(arch, printable(cpu_model(info), 120), cores, caches, tuple(isa_extensions(info)), mcpu)


def probe(conn: Connection, timeout: float = 30.0) -> BoardInfo:
    """Read architecture, CPU, cores and caches from the board (raises ``BoardUnreachable``)."""
    reply = conn.run(PROBE_SCRIPT, timeout=timeout)
    return parse_probe(reply.stdout.decode(errors="replace"))


def suggested_target(info: BoardInfo) -> str:
    """The target string for a board: its compiler, CPU, cores and caches."""
    cc = _COMPILERS.get(info.arch, f"{info.arch}-linux-gnu-gcc")
    words = ["c", f"-cc={cc}"]
    if info.mcpu:
        words.append(f"-mcpu={info.mcpu}")
    words += [f"-cores={info.cores}", f"-num-threads={info.cores}"]
    words += [f"-{k}={v}" for k, v in sorted(info.caches.items())]
    return " ".join(words)
