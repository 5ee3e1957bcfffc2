"""Failures of the measuring machinery itself, as opposed to faults of the program measured."""

from __future__ import annotations


class InfrastructureError(RuntimeError):
    """The builder or runner cannot work at all (a worker that cannot start, a missing compiler, a
    cache directory that cannot be written): no candidate could be measured, so no trial is charged
    to a program. The message names the cause and the fix."""
