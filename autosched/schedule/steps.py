"""Schedule steps: frozen, replayable records of every schedule primitive call.

A program is (workload, target, steps). Each primitive on a :class:`~autosched.schedule.Schedule`
appends one of these records and applies it; replaying the same records on a fresh schedule of the
same DAG gives the same schedule. Steps name stages and loop axes by string, so they serialize to
JSON and back without the objects that made them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar


class Step:
    """Base of all step records; subclasses register a JSON ``kind``."""

    __slots__ = ()
    kind: ClassVar[str] = ""
    registry: ClassVar[dict[str, type[Step]]] = {}

    def to_json(self) -> dict[str, Any]:
        """A JSON-compatible dict; ``Step.from_json`` reads it back."""
        data = asdict(self)  # type: ignore[call-overload]
        out: dict[str, Any] = {"kind": self.kind}
        out.update({k: list(v) if isinstance(v, tuple) else v for k, v in data.items()})
        return out

    @staticmethod
    def from_json(data: dict[str, Any]) -> Step:
        """Rebuild a step from :meth:`to_json` output; unknown kinds, missing fields and values of the
        wrong JSON type (a string for a factor, an object for a name) raise ``ValueError``."""
        kind = data.get("kind")
        cls = Step.registry.get(str(kind))
        if cls is None:
            raise ValueError(f"unknown schedule step kind {kind!r}; known: {sorted(Step.registry)}")
        args = {}
        for f in fields(cls):  # type: ignore[arg-type]
            if f.name not in data:
                raise ValueError(f"schedule step {kind!r} lacks field {f.name!r}: {data}")
            value = data[f.name]
            value = tuple(value) if isinstance(value, list) else value
            if not _FIELD_TYPES[str(f.type)](value):
                raise ValueError(f"schedule step {kind!r}: field {f.name!r} must be {f.type}, got {value!r}")
            args[f.name] = value
        return cls(**args)


def _is_int(value: Any) -> bool:
    return type(value) is int


#: checks of a JSON value read for a step field, by the field's annotation (steps come from logs)
_FIELD_TYPES: dict[str, Callable[[Any], bool]] = {
    "str": lambda v: type(v) is str,
    "int": _is_int,
    "int | None": lambda v: v is None or _is_int(v),
    "tuple[str, ...]": lambda v: type(v) is tuple and all(type(x) is str for x in v),
}


def _step(kind: str) -> Callable[[type[Step]], type[Step]]:
    def register(cls: type[Step]) -> type[Step]:
        cls.kind = kind
        Step.registry[kind] = cls
        return cls

    return register


@_step("split")
@dataclass(frozen=True, slots=True)
class SplitStep(Step):
    stage: str
    axis: str
    factor: int | None
    nparts: int | None


@_step("reorder")
@dataclass(frozen=True, slots=True)
class ReorderStep(Step):
    stage: str
    order: tuple[str, ...]


@_step("fuse")
@dataclass(frozen=True, slots=True)
class FuseStep(Step):
    stage: str
    axes: tuple[str, ...]


@_step("annotate")
@dataclass(frozen=True, slots=True)
class AnnotateStep(Step):
    """``vectorize``, ``unroll`` or ``parallel`` on a loop."""

    stage: str
    axis: str
    annotation: str


@_step("bind")
@dataclass(frozen=True, slots=True)
class BindStep(Step):
    stage: str
    axis: str
    thread: str


@_step("pragma")
@dataclass(frozen=True, slots=True)
class PragmaStep(Step):
    stage: str
    axis: str
    key: str
    value: int


@_step("compute_at")
@dataclass(frozen=True, slots=True)
class ComputeAtStep(Step):
    stage: str
    target: str
    axis: str


@_step("compute_inline")
@dataclass(frozen=True, slots=True)
class ComputeInlineStep(Step):
    stage: str


@_step("compute_root")
@dataclass(frozen=True, slots=True)
class ComputeRootStep(Step):
    stage: str


@_step("cache_write")
@dataclass(frozen=True, slots=True)
class CacheWriteStep(Step):
    stage: str
    scope: str


@_step("cache_read")
@dataclass(frozen=True, slots=True)
class CacheReadStep(Step):
    stage: str
    scope: str
    readers: tuple[str, ...]


@_step("rfactor")
@dataclass(frozen=True, slots=True)
class RfactorStep(Step):
    stage: str
    axis: str
    factor_axis: int


@_step("dot_layout")
@dataclass(frozen=True, slots=True)
class DotLayoutStep(Step):
    """Lay a matmul-like stage's second operand out in ``[N/lanes, K/group, lanes, group]`` panels
    (:mod:`autosched.schedule.dot_layout`)."""

    stage: str
    group: int
    lanes: int


@_step("store_predicate")
@dataclass(frozen=True, slots=True)
class StorePredicateStep(Step):
    """``set_store_predicate``: the condition, as the JSON text of :mod:`autosched.te.serial`."""

    stage: str
    predicate: str


@_step("storage_align")
@dataclass(frozen=True, slots=True)
class StorageAlignStep(Step):
    """``storage_align``: pad the stride of root axis ``axis`` to ``k * factor + offset``."""

    stage: str
    axis: str
    factor: int
    offset: int


@_step("tensorize")
@dataclass(frozen=True, slots=True)
class TensorizeStep(Step):
    """``tensorize``: replace the loops from ``axis`` inward by the declared intrinsic ``intrin``."""

    stage: str
    axis: str
    intrin: str


def steps_to_json(steps: tuple[Step, ...] | list[Step]) -> list[dict[str, Any]]:
    """Serialize a step list."""
    return [s.to_json() for s in steps]


def steps_from_json(data: list[dict[str, Any]]) -> tuple[Step, ...]:
    """Deserialize a step list."""
    return tuple(Step.from_json(d) for d in data)
