"""autosched.runner.remote: time candidates on boards reached over SSH (cross-compiled here).

- :mod:`.ssh`: the OpenSSH client with connection sharing, host keys checked as configured.
- :mod:`.boards`: boards files, what a board is (:func:`probe`), the target it suggests.
- :mod:`.program`: one static executable per candidate (kernel, timing harness, a main).
- :mod:`.session`: one run's directory on one board; a trial is one round trip.
- :mod:`.pool`: :class:`BoardPool`, the runner: boards in parallel, health, retries.
"""

from .boards import Board, BoardInfo, load_boards, probe, suggested_target
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
