"""A small bounded, thread-safe cache of lowered programs.

A program that is built is lowered once: the builder's source and the cost model's features read
the same :class:`~autosched.lower.Lowered` (``Task.lowered`` keys it by the task's workload key,
its target and the program's steps); the programs the search only describes are not kept (see
``Task.lowered``). Failures are kept too, so an illegal program fails at once the second time,
with the same error.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

_V = TypeVar("_V")


class LRUCache(Generic[_V]):
    """At most ``maxsize`` values by key, the least recently used dropped first.

    :meth:`get` computes a missing value outside the lock (two threads asking for the same new key
    may both compute it; the first stored wins), so a slow lowering never blocks other threads.
    """

    def __init__(self, maxsize: int = 4096) -> None:
        if maxsize < 1:
            raise ValueError(f"maxsize must be at least 1, got {maxsize}")
        self.maxsize = maxsize
        self._items: OrderedDict[Hashable, _V | Exception] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        """Drop every entry and reset the counters."""
        with self._lock:
            self._items.clear()
            self.hits = self.misses = 0

    def has(self, key: Hashable) -> bool:
        """Whether ``key`` holds a value (or a remembered failure); counts as no use."""
        with self._lock:
            return key in self._items

    def put(self, key: Hashable, value: _V) -> None:
        """Store ``value`` for ``key`` (made elsewhere: another process), unless one is there."""
        with self._lock:
            self._items.setdefault(key, value)
            self._items.move_to_end(key)
            while len(self._items) > self.maxsize:
                self._items.popitem(last=False)

    def take(self, key: Hashable) -> _V | None:
        """Remove and return the value of ``key`` (None if absent or a remembered failure)."""
        with self._lock:
            got = self._items.pop(key, None)
        return None if isinstance(got, Exception) else got

    def get(self, key: Hashable, make: Callable[[], _V]) -> _V:
        """The value for ``key``, made by ``make()`` if absent; an exception ``make`` raised for
        this key before is raised again."""
        with self._lock:
            got = self._items.get(key)
            if got is not None:
                self._items.move_to_end(key)
                self.hits += 1
            else:
                self.misses += 1
        if got is None:
            try:
                got = make()
            except Exception as e:  # a deterministic failure of this program: remember it
                got = e
            with self._lock:
                got = self._items.setdefault(key, got)
                self._items.move_to_end(key)
                while len(self._items) > self.maxsize:
                    self._items.popitem(last=False)
        if isinstance(got, Exception):
            raise got.with_traceback(None)
        return got
