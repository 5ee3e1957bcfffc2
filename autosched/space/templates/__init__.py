"""Knob templates (AutoTVM) for the built-in CPU operators (and a first few GPU ones), and their registry.

``template_space(workload, target)`` gives a template's :class:`~autosched.space.knobs.ConfigSpace`;
``instantiate(workload, target, config)`` the schedule of one of its configs. Importing this package
registers the built-in templates; ``python -m autosched.space.templates`` lists them with the
sizes of their spaces for the reference workloads.
"""

from . import conv2d, dense, depthwise, gpu, matmul  # noqa: F401  (importing registers the templates)
from .registry import (
    TemplateDef,
    TemplateFunc,
    get_template,
    has_template,
    instantiate,
    list_templates,
    register_template,
    template_space,
)

__all__ = [
    "TemplateDef",
    "TemplateFunc",
    "get_template",
    "has_template",
    "instantiate",
    "list_templates",
    "register_template",
    "template_space",
]
