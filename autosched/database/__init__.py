"""The tuning database and its use in applications.

- :class:`Database`: a directory of tuning logs per machine and target (default
  ``$AUTOSCHED_DB``, else ``$XDG_CACHE_HOME/autosched/db``, else ``~/.cache/autosched/db``);
  ``asc.tune(task)`` without ``log=`` records into it.
- :func:`compile`: the best known kernel of a task for this machine, else the default schedule
  with a :class:`NotTunedWarning`; never tunes.
- :func:`apply_best`: logs in scope for :func:`compile` (a context manager and a decorator).
- :func:`load_best`: ``load_best(task)`` from the database, ``load_best(log, task)`` from a log.
- :class:`TuningStore`: the interface of a store; an application plugs its own where a
  database goes (``asc.tune(task, log=store)``, ``load_best(task, db=store)``, ``apply_best(store)``).
"""

from .apply import (
    ApplyBest,
    Found,
    NotTunedWarning,
    apply_best,
    compile,  # noqa: A004 (asc.compile)
    find_best,
    load_best,
)
from .interface import TuningStore
from .machine import describe, fingerprint, fingerprint_for, host_description
from .store import Database, GcAction, GcReport, default_path, target_slug

__all__ = [
    "ApplyBest",
    "Database",
    "Found",
    "GcAction",
    "GcReport",
    "NotTunedWarning",
    "apply_best",
    "compile",
    "default_path",
    "describe",
    "find_best",
    "fingerprint",
    "fingerprint_for",
    "host_description",
    "load_best",
    "target_slug",
    "TuningStore",
]
