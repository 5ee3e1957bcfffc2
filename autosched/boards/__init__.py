"""autosched.boards: time candidates on boards reached over SSH (cross-compiled here).

An executor above the runner: it speaks the runner's measure contract (``MeasureInput`` in,
``MeasureResult`` out) and reads a board's CPU with :mod:`autosched.hardware`'s cpuinfo parsing,
as the tuning database reads this host's.

- :mod:`.ssh`: the OpenSSH client with connection sharing, host keys checked as configured.
- :mod:`.board`: boards files, what a board is (:func:`probe`), the target it suggests.
- :mod:`.program`: one static executable per candidate (kernel, timing harness, a main).
- :mod:`.session`: one run's directory on one board; a trial is one round trip.
- :mod:`.pool`: :class:`BoardPool`, the runner: boards in parallel, health, retries.
"""

from .board import Board, BoardInfo, load_boards, probe, suggested_target
from .pool import BoardPool, BoardsDown
from .program import RemoteBuilder, main_source
from .ssh import SSH_CONFIG_ENV, BoardUnreachable, Connection, HostKeyRefused

__all__ = [
    "SSH_CONFIG_ENV",
    "Board",
    "BoardInfo",
    "BoardPool",
    "BoardUnreachable",
    "BoardsDown",
    "Connection",
    "HostKeyRefused",
    "RemoteBuilder",
    "load_boards",
    "main_source",
    "probe",
    "suggested_target",
]
