"""The template registry: one knob template per (workload name, target kind).

A template is ``template(cfg, tensors, target) -> Schedule`` (see :mod:`autosched.space.knobs`)::

    @register_template("matmul", target_kind="c")
    def matmul_template(cfg, tensors, target): ...

    space = template_space(wl, "c")               # run once with a ConfigSpace: the knobs
    s = instantiate(wl, "c", space.get(1234))     # run with one config: the program (s.steps)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from ...expr import Tensor
from ...ops import Workload
from ...schedule import Schedule
from ...target import Target
from ..knobs import Config, ConfigEntity, ConfigSpace

TemplateFunc: TypeAlias = Callable[[Config, list[Tensor], Target], Schedule]
TargetLike: TypeAlias = str | Target


@dataclass(frozen=True, slots=True)
class TemplateDef:
    """A registered template: the workload and target kind it serves, and its function."""

    workload: str
    target_kind: str
    func: TemplateFunc

    @property
    def doc(self) -> str:
        """The first line of the template's docstring."""
        return (self.func.__doc__ or "").strip().split("\n", 1)[0]


_TEMPLATES: dict[tuple[str, str], TemplateDef] = {}


def register_template(
    workload: str, target_kind: str = "c", *, override: bool = False
) -> Callable[[TemplateFunc], TemplateFunc]:
    """Register ``template(cfg, tensors, target)`` for a workload name on a target kind."""

    def register(func: TemplateFunc) -> TemplateFunc:
        key = (workload, target_kind)
        if key in _TEMPLATES and not override:
            raise ValueError(f"a template for {workload!r} on {target_kind!r} is already registered")
        _TEMPLATES[key] = TemplateDef(workload, target_kind, func)
        return func

    return register


def list_templates() -> list[TemplateDef]:
    """Every registered template, sorted by workload name and target kind."""
    return [_TEMPLATES[k] for k in sorted(_TEMPLATES)]


def has_template(workload: str | Workload, target: TargetLike = "c") -> bool:
    """Whether a template is registered for a workload (or its name) on ``target``'s kind (or the
    kind it is like: a C dialect uses the C templates)."""
    name = workload.name if isinstance(workload, Workload) else workload
    return (name, Target.parse(target).like) in _TEMPLATES


def get_template(workload: str | Workload, target: TargetLike = "c") -> TemplateFunc:
    """The template for a workload (or its name) on ``target``'s kind; ``KeyError`` if none."""
    name = workload.name if isinstance(workload, Workload) else workload
    kind = Target.parse(target).like
    found = _TEMPLATES.get((name, kind))
    if found is None:
        known = ", ".join(f"{w} ({k})" for w, k in sorted(_TEMPLATES)) or "none"
        raise KeyError(f"no template for workload {name!r} on {kind!r} targets; templates: {known}")
    return found.func


def template_space(workload: Workload, target: TargetLike = "c") -> ConfigSpace:
    """The config space of the workload's template on ``target``."""
    tgt = Target.parse(target)
    space = ConfigSpace()
    get_template(workload, tgt)(space, workload.tensors(), tgt)
    return space


def instantiate(
    workload: Workload, target: TargetLike, config: ConfigEntity | int | Mapping[str, Any]
) -> Schedule:
    """The schedule of one config (an entity, an index, or knob values); ``.steps`` is the program."""
    tgt = Target.parse(target)
    if not isinstance(config, ConfigEntity):
        space = template_space(workload, tgt)
        config = space.get(config) if isinstance(config, int) else space.from_dict(config)
    return get_template(workload, tgt)(config, workload.tensors(), tgt)
