"""Knob entities: the values a template knob takes, how each applies to a schedule, and the
enumeration of a knob's values from its definition (see :mod:`autosched.space.knobs`).

Split entities store all ``num_outputs`` factors explicitly, outermost first. With the ``factors``
policy their product is the extent; with ``power2`` and ``candidate`` the outer factor is
``ceil(extent / product(inner factors))`` (a split that need not divide).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from ..expr import IterVar, Operation, Tensor
from ..schedule import Schedule, Stage

AxisLike: TypeAlias = IterVar | str
StageLike: TypeAlias = Stage | Tensor | Operation | str
JSONScalar: TypeAlias = bool | int | float | str | None

ANNOTATIONS = ("none", "unroll", "vec")
MAX_REORDER_AXES = 8


def _stage(s: Schedule, op: StageLike) -> Stage:
    return op if isinstance(op, Stage) else s[op]


# ------------------------------------------------------------------------------------- entities


@dataclass(frozen=True, slots=True)
class SplitEntity:
    """Factors of a split, outermost first; ``apply`` splits an axis into ``len(size)`` loops."""

    size: tuple[int, ...]

    def apply(self, s: Schedule, op: StageLike, axis: AxisLike) -> list[IterVar]:
        """Split ``axis`` of stage ``op`` by the inner factors; the loops, outermost first."""
        stage = _stage(s, op)
        outer, inner = stage.split(axis, factor=math.prod(self.size[1:]))
        loops = [outer]
        for level in range(2, len(self.size)):
            outer, inner = stage.split(inner, factor=math.prod(self.size[level:]))
            loops.append(outer)
        return [*loops, inner]

    def to_json(self) -> list[int]:
        return list(self.size)


@dataclass(frozen=True, slots=True)
class ReorderEntity:
    """A permutation: ``apply`` puts ``axes[perm[0]], axes[perm[1]], ...`` in that order."""

    perm: tuple[int, ...]

    def apply(self, s: Schedule, op: StageLike, axes: Sequence[AxisLike]) -> list[AxisLike]:
        """Reorder ``axes`` of stage ``op``; the axes in their new order."""
        if len(axes) != len(self.perm):
            raise ValueError(f"reorder entity for {len(self.perm)} axes applied to {len(axes)}")
        order = [axes[p] for p in self.perm]
        _stage(s, op).reorder(*order)
        return order

    def to_json(self) -> list[int]:
        return list(self.perm)


@dataclass(frozen=True, slots=True)
class AnnotateEntity:
    """One of ``none``, ``unroll``, ``vec`` per axis, outermost first."""

    anns: tuple[str, ...]

    def apply(
        self,
        s: Schedule,
        op: StageLike,
        axes: Sequence[AxisLike],
        extents: Sequence[int] | None = None,
        max_unroll: int | None = None,
    ) -> None:
        """Annotate ``axes`` of stage ``op``. With ``extents`` and ``max_unroll``, an ``unroll`` is
        dropped (the loop stays serial) where the product of the unrolled extents, counted from the
        innermost axis outwards, would exceed ``max_unroll``."""
        if len(axes) != len(self.anns):
            raise ValueError(f"annotate entity for {len(self.anns)} axes applied to {len(axes)}")
        if max_unroll is not None and (extents is None or len(extents) != len(axes)):
            raise ValueError("max_unroll needs one extent per axis")
        stage = _stage(s, op)
        unrolled = 1
        for pos in reversed(range(len(axes))):
            ann, axis = self.anns[pos], axes[pos]
            if ann == "vec":
                stage.vectorize(axis)
            elif ann == "unroll":
                size = unrolled * (extents[pos] if extents is not None else 1)
                if max_unroll is None or size <= max_unroll:
                    stage.unroll(axis)
                    unrolled = size

    def to_json(self) -> list[str]:
        return list(self.anns)


@dataclass(frozen=True, slots=True)
class OtherEntity:
    """A plain knob's value (``define_knob``)."""

    val: JSONScalar

    def to_json(self) -> JSONScalar:
        return self.val


Entity: TypeAlias = SplitEntity | ReorderEntity | AnnotateEntity | OtherEntity


@dataclass(frozen=True, slots=True)
class Knob:
    """One dimension of a space: its name, kind, entities, and the definition that made them."""

    name: str
    kind: str  # "split" | "reorder" | "annotate" | "other"
    entities: tuple[Entity, ...]
    definition: tuple[Any, ...]
    _lookup: dict[Any, int] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.entities:
            raise ValueError(f"knob {self.name!r} has no values ({self.definition})")
        for i, e in enumerate(self.entities):
            self._lookup.setdefault(key(e.to_json()), i)

    def __len__(self) -> int:
        return len(self.entities)

    def index(self, value: Any) -> int:
        """The position of an entity given as its JSON value (``[1, 4, 8]``, ``"unroll"``...)."""
        try:
            return self._lookup[key(value)]
        except (KeyError, TypeError):
            raise ValueError(f"knob {self.name!r} has no value {value!r}") from None


def key(value: Any) -> Any:
    """A hashable form of a JSON value (lists become tuples; bools stay distinct from ints)."""
    if isinstance(value, (list, tuple)):
        return tuple(key(v) for v in value)
    return (type(value).__name__, value) if isinstance(value, bool) else value


# ---------------------------------------------------------------------------- knob construction


def split_extent(axis: int | IterVar) -> int:
    """The extent a split is defined over: an int, or a root axis's extent."""
    extent = axis.extent if isinstance(axis, IterVar) else axis
    if isinstance(extent, bool) or not isinstance(extent, int) or extent < 1:
        raise ValueError(
            f"a split needs a positive extent, got {extent!r} (pass the extent for derived loops)"
        )
    return extent


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def _factorizations(n: int, parts: int, max_factor: int) -> Iterator[tuple[int, ...]]:
    """Ordered ``parts``-tuples with product ``n``, inner factors at most ``max_factor``."""
    if parts == 1:
        yield (n,)
        return
    for d in _divisors(n):
        if d <= max_factor:
            for rest in _factorizations(n // d, parts - 1, max_factor):
                yield (*rest, d)


def _power2_splits(n: int, parts: int, max_factor: int) -> Iterator[tuple[int, ...]]:
    """Inner factors powers of two (each at most ``max_factor``, product at most ``n``)."""
    pow2s = [1 << e for e in range(n.bit_length()) if 1 << e <= min(n, max_factor)]
    for inner in itertools.product(pow2s, repeat=parts - 1):
        prod = math.prod(inner)
        if prod <= n:
            yield (-(-n // prod), *inner)


def split_entities(
    extent: int,
    num_outputs: int,
    policy: str,
    max_factor: int | None = None,
    candidate: Sequence[Sequence[int | None]] | None = None,
) -> list[SplitEntity]:
    """The entities of a split knob (see :meth:`ConfigSpace.define_split`)."""
    if num_outputs < 2:
        raise ValueError(f"a split needs num_outputs >= 2, got {num_outputs}")
    bound = extent if max_factor is None else max_factor
    if bound < 1:
        raise ValueError(f"max_factor must be positive, got {max_factor}")
    if policy == "factors":
        sizes = list(_factorizations(extent, num_outputs, bound))
    elif policy == "power2":
        sizes = list(_power2_splits(extent, num_outputs, bound))
    elif policy == "candidate":
        if not candidate:
            raise ValueError("the candidate policy needs a non-empty candidate list")
        sizes = []
        for entry in candidate:
            inner = tuple(f for f in entry[1:] if isinstance(f, int) and not isinstance(f, bool) and f >= 1)
            if len(entry) != num_outputs or len(inner) != num_outputs - 1:
                raise ValueError(
                    f"split candidate {list(entry)} must be {num_outputs} factors, inner ones >= 1"
                )
            outer = -(-extent // math.prod(inner))
            if entry[0] not in (-1, None, outer):
                raise ValueError(f"split candidate {list(entry)}: the outer factor must be {outer} (or -1)")
            if max(inner) <= bound:
                sizes.append((outer, *inner))
        sizes = list(dict.fromkeys(sizes))
    else:
        raise ValueError(f"unknown split policy {policy!r}; known: factors, power2, candidate")
    return [SplitEntity(size) for size in sizes]


def axis_count(axes: int | Sequence[AxisLike]) -> int:
    """How many axes a reorder or annotate knob covers (given as a count or as the axes)."""
    n = axes if isinstance(axes, int) else len(axes)
    if n < 1:
        raise ValueError(f"need at least one axis, got {n}")
    return n


def reorder_entities(n: int, policy: str, candidate: Sequence[Sequence[int]] | None) -> list[ReorderEntity]:
    """The entities of a reorder knob (see :meth:`ConfigSpace.define_reorder`)."""
    if policy == "all":
        if n > MAX_REORDER_AXES:
            raise ValueError(f"policy 'all' over {n} axes is too large; give candidates instead")
        return [ReorderEntity(p) for p in itertools.permutations(range(n))]
    if policy == "candidate":
        if not candidate:
            raise ValueError("the candidate policy needs a non-empty candidate list")
        perms = [tuple(p) for p in candidate]
        for p in perms:
            if sorted(p) != list(range(n)):
                raise ValueError(f"reorder candidate {list(p)} is not a permutation of range({n})")
        return [ReorderEntity(p) for p in dict.fromkeys(perms)]
    raise ValueError(f"unknown reorder policy {policy!r}; known: all, candidate")


def annotate_entities(n: int, policy: str, candidate: Sequence[Sequence[str]] | None) -> list[AnnotateEntity]:
    """The entities of an annotate knob (see :meth:`ConfigSpace.define_annotate`)."""
    outer: list[tuple[str, ...]] = [("none", "unroll")] * (n - 1)
    choices: list[tuple[str, ...]]
    if policy == "try_unroll":
        choices = [*outer, ("none", "unroll")]
    elif policy == "try_vec":
        choices = [("none",)] * (n - 1) + [("none", "vec")]
    elif policy == "try_unroll_vec":
        choices = [*outer, ("none", "unroll", "vec")]
    elif policy == "candidate":
        if not candidate:
            raise ValueError("the candidate policy needs a non-empty candidate list")
        anns = [tuple(c) for c in candidate]
        for a in anns:
            if len(a) != n or any(x not in ANNOTATIONS for x in a):
                raise ValueError(f"annotate candidate {list(a)}: need {n} of {ANNOTATIONS}")
        return [AnnotateEntity(a) for a in dict.fromkeys(anns)]
    else:
        raise ValueError(
            f"unknown annotate policy {policy!r}; known: try_unroll, try_vec, try_unroll_vec, candidate"
        )
    return [AnnotateEntity(a) for a in itertools.product(*choices)]
