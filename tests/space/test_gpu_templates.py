"""The GPU gemm templates' virtual-thread knob (autosched.space.templates.gpu): defined last, so that
the points without virtual threads keep their indices; its points bind vthreads, replay from their
steps' JSON and run correctly on PoCL."""

from __future__ import annotations

import json

import pytest
from gpu_cases import check_outputs

import autosched as asc
from autosched.space.templates import instantiate, template_space


@pytest.mark.parametrize("name, args", [("matmul", (64, 64, 64)), ("dense", (32, 64, 16)),
                                        ("batch_matmul", (2, 32, 32, 16))])
def test_the_vthreads_knob_comes_last_and_binds_virtual_threads(name: str, args: tuple) -> None:
    workload = asc.Task(name, args, target="opencl").workload
    space = template_space(workload, "opencl")
    assert list(space.knobs)[-1] == "vthreads" and space.knobs["vthreads"] == 2
    half = len(space) // 2
    for index in (0, half - 1, half, len(space) - 1):
        knobs = space.get(index).to_dict()
        assert knobs["vthreads"] == (2 if index >= half else 1)
        s = instantiate(workload, "opencl", index)
        binds = [st for st in s.steps if getattr(st, "thread", None) == "vthread"]
        assert len(binds) == (2 if index >= half else 0)
        steps = asc.steps_from_json(json.loads(json.dumps(asc.steps_to_json(s.steps))))
        tensors = workload.tensors()
        again = asc.Schedule.replay([tensors[-1]], steps)
        assert asc.emit(again, tensors, target="opencl") == asc.emit(s, tensors, target="opencl")


@pytest.mark.requires("pyopencl")
def test_a_vthreads_point_of_the_matmul_template_matches_numpy() -> None:
    task = asc.Task("matmul", (72, 80, 40), target="opencl")  # no tile divides it
    space = template_space(task.workload, "opencl")
    index = len(space) - 1  # the largest block, 2 x 2 virtual threads of 4 x 4 each, 16-deep tiles
    assert space.get(index).to_dict()["vthreads"] == 2
    s = instantiate(task.workload, "opencl", index)
    check_outputs(task, asc.build(s, task.workload.tensors(), target="opencl"))
