"""Reproducible random programs in tests: seeds that are the same in every process, and failures
that say which seed and which steps made them.

Python's ``hash()`` of a string (or a tuple holding one) is salted per process (``PYTHONHASHSEED``),
so a seed derived from it differs from run to run and a failing sample cannot be drawn again.
:func:`stable_seed` derives a seed from the JSON text of its parts instead (CRC-32: the same value on
every machine, in every process). :func:`reproducible` adds the seed and the program's steps (as
``autosched.steps_to_json`` writes them) to any exception raised inside it, so the failure report
holds what is needed to replay the program.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import autosched as asc


def stable_seed(*parts: object) -> int:
    """A 32-bit seed from ``parts`` (strings, numbers, tuples of them), equal in every process."""
    text = json.dumps(parts, default=repr, separators=(",", ":"))
    return zlib.crc32(text.encode())


def describe(steps: Sequence[asc.Step], seed: int | None = None, **context: object) -> str:
    """One line naming the seed, any context (workload, target, sample index) and the steps."""
    parts = [] if seed is None else [f"seed={seed}"]
    parts += [f"{k}={v}" for k, v in context.items()]
    parts.append(f"steps={json.dumps(asc.steps_to_json(list(steps)))}")
    return "reproduce with: " + "; ".join(parts)


@contextmanager
def reproducible(steps: Sequence[asc.Step], seed: int | None = None, **context: object) -> Iterator[None]:
    """Run the block; if it raises, add :func:`describe` of the program to the exception's notes."""
    try:
        yield
    except BaseException as e:  # pytest.fail raises a BaseException
        e.add_note(describe(steps, seed, **context))
        raise
