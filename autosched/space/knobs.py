"""Template search spaces (AutoTVM): knobs, a :class:`ConfigSpace` of them, and its configs.

A template is one function that both *defines* its knobs and *applies* their values::

    def template(cfg, tensors, target):
        s = create_schedule(C)
        cfg.define_split("tile_i", C.op.axis[0], num_outputs=3)
        i0, i1, i2 = cfg["tile_i"].apply(s, C, C.op.axis[0])
        ...
        return s

Run with a :class:`ConfigSpace`, ``define_*`` records each knob and ``cfg[name]`` gives the knob's
first entity, so the template still returns a valid schedule (which is thrown away). Run with a
:class:`ConfigEntity` (one point of that space), ``define_*`` only checks that the definition is the
one the space recorded and ``cfg[name]`` gives the chosen value. Knob definitions must not depend
on other knobs' values: the space is the product of its knobs.

A config is an index into the space and a dict of knob values, both ways: ``space.get(index)``,
``space.from_dict(values)``, ``entity.index``, ``entity.to_dict()``; ``to_json`` / ``from_json``
give ``{"index": i, "knobs": {...}}``. The first defined knob varies fastest with the index.
The entities (knob values) and their enumeration live in :mod:`autosched.space.entities`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypeAlias

import numpy as np

from ..expr import IterVar
from .entities import (
    AnnotateEntity,
    AxisLike,
    Entity,
    JSONScalar,
    Knob,
    OtherEntity,
    ReorderEntity,
    SplitEntity,
    annotate_entities,
    axis_count,
    key,
    reorder_entities,
    split_entities,
    split_extent,
)

__all__ = [
    "AnnotateEntity",
    "Config",
    "ConfigEntity",
    "ConfigSpace",
    "Entity",
    "Knob",
    "OtherEntity",
    "ReorderEntity",
    "SplitEntity",
]


# ------------------------------------------------------------------------------ spaces and configs


class _Definer:
    """The ``define_*`` calls a template makes; a space records them, a config checks them."""

    __slots__ = ()

    def _define(self, name: str, kind: str, definition: tuple[Any, ...]) -> None:
        raise NotImplementedError

    def define_split(
        self,
        name: str,
        axis: int | IterVar,
        num_outputs: int = 2,
        policy: str = "factors",
        max_factor: int | None = None,
        candidate: Sequence[Sequence[int | None]] | None = None,
    ) -> None:
        """A split of an axis (or an extent) into ``num_outputs`` loops.

        ``factors``: every ordered factorization of the extent; ``power2``: inner factors powers of
        two with product at most the extent; ``candidate``: the given factor lists (outer factor
        ``-1`` for "computed"). ``max_factor`` bounds the inner factors.
        """
        cand = None if candidate is None else tuple(tuple(c) for c in candidate)
        self._define(name, "split", (split_extent(axis), num_outputs, policy, max_factor, cand))

    def define_reorder(
        self,
        name: str,
        axes: int | Sequence[AxisLike],
        policy: str = "all",
        candidate: Sequence[Sequence[int]] | None = None,
    ) -> None:
        """An order of ``axes`` (a count or the axes): all permutations, or the ``candidate`` ones."""
        cand = None if candidate is None else tuple(tuple(c) for c in candidate)
        self._define(name, "reorder", (axis_count(axes), policy, cand))

    def define_annotate(
        self,
        name: str,
        axes: int | Sequence[AxisLike],
        policy: str = "try_unroll",
        candidate: Sequence[Sequence[str]] | None = None,
    ) -> None:
        """Unroll/vectorize choices for ``axes`` (a count or the axes, outermost first).

        ``try_unroll``: each axis unrolled or not; ``try_vec``: the last axis vectorized or not;
        ``try_unroll_vec``: each axis unrolled or not, the last one vectorized as a third choice;
        ``candidate``: the given tuples of ``none``/``unroll``/``vec``.
        """
        cand = None if candidate is None else tuple(tuple(c) for c in candidate)
        self._define(name, "annotate", (axis_count(axes), policy, cand))

    def define_knob(self, name: str, values: Sequence[JSONScalar]) -> None:
        """A plain knob over ``values`` (JSON scalars, distinct)."""
        self._define(name, "other", (tuple(values),))


def _build(name: str, kind: str, definition: tuple[Any, ...]) -> Knob:
    entities: Sequence[Entity]
    if kind == "split":
        entities = split_entities(*definition)
    elif kind == "reorder":
        entities = reorder_entities(*definition)
    elif kind == "annotate":
        entities = annotate_entities(*definition)
    else:
        (values,) = definition
        if any(not isinstance(v, (bool, int, float, str, type(None))) for v in values):
            raise ValueError(f"knob {name!r}: values must be JSON scalars, got {list(values)}")
        if len({key(v) for v in values}) != len(values):
            raise ValueError(f"knob {name!r}: values repeat: {list(values)}")
        entities = [OtherEntity(v) for v in values]
    return Knob(name, kind, tuple(entities), definition)


class ConfigSpace(_Definer):
    """The product of a template's knobs, in definition order (the first varies fastest)."""

    def __init__(self) -> None:
        self._knobs: dict[str, Knob] = {}
        self._strides: list[int] = []
        self.size = 1

    def _define(self, name: str, kind: str, definition: tuple[Any, ...]) -> None:
        if name in self._knobs:
            raise ValueError(f"knob {name!r} is defined twice")
        knob = _build(name, kind, definition)
        self._knobs[name] = knob
        self._strides.append(self.size)
        self.size *= len(knob)

    def __getitem__(self, name: str) -> Entity:
        """The knob's first entity: what a template applies while its space is being defined."""
        return self.knob(name).entities[0]

    def knob(self, name: str) -> Knob:
        """The knob called ``name``."""
        try:
            return self._knobs[name]
        except KeyError:
            raise KeyError(f"no knob {name!r}; knobs: {', '.join(self._knobs) or 'none'}") from None

    @property
    def knobs(self) -> dict[str, int]:
        """Knob names and their sizes, in definition order."""
        return {name: len(k) for name, k in self._knobs.items()}

    def __len__(self) -> int:
        """The number of configs (``size`` holds it too, also past ``sys.maxsize``)."""
        return self.size

    def __repr__(self) -> str:
        parts = ", ".join(f"{n}: {k}" for n, k in self.knobs.items())
        return f"ConfigSpace(size={self.size}; {parts})"

    def __iter__(self) -> Iterator[ConfigEntity]:
        return (self.get(i) for i in range(self.size))

    def get(self, index: int) -> ConfigEntity:
        """The config at ``index`` (``0 <= index < len(space)``)."""
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not 0 <= index < self.size:
            raise IndexError(f"config index {index!r} is outside [0, {self.size})")
        rest, chosen = int(index), {}
        for knob in self._knobs.values():
            rest, pos = divmod(rest, len(knob))
            chosen[knob.name] = knob.entities[pos]
        return ConfigEntity(self, int(index), chosen)

    def from_dict(self, values: Mapping[str, Any]) -> ConfigEntity:
        """The config with these knob values (JSON form, as :meth:`ConfigEntity.to_dict` gives)."""
        missing, extra = self._knobs.keys() - values.keys(), values.keys() - self._knobs.keys()
        if missing or extra:
            raise ValueError(
                f"config knobs do not match the space: missing {sorted(missing)}, extra {sorted(extra)}"
            )
        index = sum(
            k.index(values[n]) * st for (n, k), st in zip(self._knobs.items(), self._strides, strict=True)
        )
        return self.get(index)

    def from_json(self, data: Mapping[str, Any]) -> ConfigEntity:
        """Read :meth:`ConfigEntity.to_json` output; the knob values decide, the index is checked."""
        if not isinstance(data, Mapping) or "knobs" not in data:
            raise ValueError(f"a config in JSON is {{'index': i, 'knobs': {{...}}}}, got {data!r}")
        entity = self.from_dict(data["knobs"])
        if "index" in data and data["index"] != entity.index:
            raise ValueError(
                f"config index {data['index']} does not match its knob values (index {entity.index})"
            )
        return entity

    def sample(self, rng: np.random.Generator | int | None, n: int) -> list[ConfigEntity]:
        """``n`` distinct configs drawn uniformly (all of them, shuffled, if the space is smaller)."""
        gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        n = min(n, self.size)
        if 2 * n >= self.size:
            return [self.get(int(i)) for i in gen.permutation(self.size)[:n]]
        picked: dict[int, None] = {}
        while len(picked) < n:
            index = sum(
                int(gen.integers(len(k))) * st
                for k, st in zip(self._knobs.values(), self._strides, strict=True)
            )
            picked[index] = None
        return [self.get(i) for i in picked]


class ConfigEntity(_Definer):
    """One point of a :class:`ConfigSpace`: its index and the chosen entity of every knob."""

    __slots__ = ("space", "index", "_chosen")

    def __init__(self, space: ConfigSpace, index: int, chosen: dict[str, Entity]) -> None:
        self.space = space
        self.index = index
        self._chosen = chosen

    def _define(self, name: str, kind: str, definition: tuple[Any, ...]) -> None:
        knob = self.space.knob(name)
        if (knob.kind, knob.definition) != (kind, definition):
            raise ValueError(
                f"knob {name!r} is defined as {kind}{definition}, "
                f"but the space has {knob.kind}{knob.definition}"
            )

    def __getitem__(self, name: str) -> Entity:
        try:
            return self._chosen[name]
        except KeyError:
            raise KeyError(f"no knob {name!r}; knobs: {', '.join(self._chosen) or 'none'}") from None

    def to_dict(self) -> dict[str, Any]:
        """Knob name -> value in JSON form."""
        return {name: e.to_json() for name, e in self._chosen.items()}

    def to_json(self) -> dict[str, Any]:
        """``{"index": i, "knobs": {...}}``; :meth:`ConfigSpace.from_json` reads it back."""
        return {"index": self.index, "knobs": self.to_dict()}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ConfigEntity) and other.space is self.space and other.index == self.index

    def __hash__(self) -> int:
        return hash((id(self.space), self.index))

    def __repr__(self) -> str:
        return f"ConfigEntity(index={self.index}, {self.to_dict()})"


Config: TypeAlias = ConfigSpace | ConfigEntity
"""What a template receives: the space while defining, one of its configs while applying."""
