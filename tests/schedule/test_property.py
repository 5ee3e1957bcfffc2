"""Property tests: random legal schedules compute the reference; illegal steps are rejected cleanly.

Legal: hypothesis draws step sequences for matmul and conv2d_nchw (see ``random_schedules``); each
program is built with gcc and compared with the numpy reference.

Illegal: every illegal request must raise ``asc.ScheduleError`` whose message names the step kind,
and a step rejected by the schedule must leave it exactly as it was (same steps, same stages, same
emitted C). Requests that are only illegal for the target (bind on a CPU, nested parallel loops)
are rejected at lower/build time, also with a ``ScheduleError``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from random_schedules import DRAWERS, draw_conv2d, draw_matmul, kind, leaf_names
from repro import describe
from schedule_cases import check_against_reference

import autosched as asc
from autosched.schedule import steps as S

pytestmark = pytest.mark.requires("gcc")

PROPERTY = settings(max_examples=30, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ------------------------------------------------------------------------------ legal sequences


@PROPERTY
@given(data=st.data())
def test_random_matmul_schedule_matches_reference(data: st.DataObject) -> None:
    wl, s, target = draw_matmul(data.draw)
    note(describe(s.steps, workload=wl, target=target))
    check_against_reference(wl, s, target)


@PROPERTY
@given(data=st.data())
def test_random_conv2d_schedule_matches_reference(data: st.DataObject) -> None:
    wl, s, target = draw_conv2d(data.draw)
    note(describe(s.steps, workload=wl, target=target))
    check_against_reference(wl, s, target)


# ------------------------------------------------------------------------------ helpers


def snapshot(s: asc.Schedule, args: list[asc.Tensor]) -> tuple[Any, ...]:
    """Everything a rejected step must leave unchanged."""
    stages = {
        name: (list(st_.leaves), list(st_.relations), dict(st_.annotations),
               {k: dict(v) for k, v in st_.pragmas.items()}, st_.attach, st_.scope, dict(st_.kinds), st_.op)
        for name, st_ in s.stages.items()
    }
    return len(s.steps), list(s.steps), list(s.stages), stages, asc.emit(s, args)


def assert_rejected(s: asc.Schedule, args: list[asc.Tensor], request: Callable[[], object],
                    words: str) -> asc.ScheduleError:
    """``request()`` raises ScheduleError naming the step (``words``: a regex) and changes nothing."""
    before = snapshot(s, args)
    with pytest.raises(asc.ScheduleError) as info:
        request()
    message = str(info.value)
    assert re.search(words, message), f"error message does not name the step ({words}): {message}"
    after = snapshot(s, args)
    assert after[:4] == before[:4], "a rejected step changed the schedule"
    assert after[4] == before[4], "a rejected step changed the emitted C"
    return info.value


def assert_build_rejected(
    s: asc.Schedule, args: list[asc.Tensor], words: str, target: str = "c", lower: bool = True
) -> None:
    """lower (unless ``lower`` is False), emit and build all raise ScheduleError naming ``words``
    (a regex)."""
    calls = [lambda: asc.emit(s, args, target=target), lambda: asc.build(s, args, target=target)]
    for call in ([lambda: asc.lower(s, args)] if lower else []) + calls:
        with pytest.raises(asc.ScheduleError) as info:
            call()
        assert re.search(words, str(info.value)), f"error message does not name {words}: {info.value}"


def matmul(M: int = 13, N: int = 11, K: int = 7) -> tuple[asc.Workload, asc.Schedule, list[asc.Tensor]]:
    wl = asc.get_workload("matmul", (M, N, K))
    return wl, asc.create_schedule(wl.outputs), wl.tensors()


def conv(pad: int = 1) -> tuple[asc.Workload, asc.Schedule, list[asc.Tensor]]:
    wl = asc.get_workload("conv2d_nchw", (1, 3, 9, 9, 4, 3, 3, 1, pad, 1))
    return wl, asc.create_schedule(wl.outputs), wl.tensors()


def softmax() -> tuple[asc.Workload, asc.Schedule, list[asc.Tensor]]:
    wl = asc.get_workload("softmax", (5, 9))
    return wl, asc.create_schedule(wl.outputs), wl.tensors()


# ------------------------------------------------------------------------------ illegal: one by one


def _vectorize_reduce() -> tuple[Any, ...]:
    wl, s, args = matmul()
    (k,) = s["C"].op.reduce_axis
    return s, args, lambda: s["C"].vectorize(k), "annotate|vectorize"


def _parallel_reduce() -> tuple[Any, ...]:
    wl, s, args = matmul()
    (k,) = s["C"].op.reduce_axis
    s["C"].reorder(k, *s["C"].op.axis)
    return s, args, lambda: s["C"].parallel(k), "annotate|parallel"


def _parallel_split_reduce() -> tuple[Any, ...]:
    wl, s, args = matmul()
    (k,) = s["C"].op.reduce_axis
    ko, ki = s["C"].split(k, factor=2)
    return s, args, lambda: s["C"].parallel(ko), "annotate|parallel"


def _vectorize_fused_reduce() -> tuple[Any, ...]:
    wl, s, args = conv()
    rc, ry, rx = s["conv"].op.reduce_axis
    fused = s["conv"].fuse(ry, rx)
    return s, args, lambda: s["conv"].vectorize(fused), "annotate|vectorize"


def _fuse_non_adjacent() -> tuple[Any, ...]:
    wl, s, args = conv()
    n, f, y, x = s["conv"].op.axis
    return s, args, lambda: s["conv"].fuse(f, x), "fuse"


def _fuse_wrong_order() -> tuple[Any, ...]:
    wl, s, args = matmul()
    i, j = s["C"].op.axis
    return s, args, lambda: s["C"].fuse(j, i), "fuse"


def _fuse_data_reduce() -> tuple[Any, ...]:
    wl, s, args = matmul()
    i, j = s["C"].op.axis
    (k,) = s["C"].op.reduce_axis
    return s, args, lambda: s["C"].fuse(j, k), "fuse"


def _fuse_one_axis() -> tuple[Any, ...]:
    wl, s, args = matmul()
    i, j = s["C"].op.axis
    return s, args, lambda: s["C"].fuse(i), "fuse"


def _fuse_split_axis() -> tuple[Any, ...]:
    wl, s, args = matmul()
    i, j = s["C"].op.axis
    s["C"].split(j, factor=4)
    return s, args, lambda: s["C"].fuse(i, j), "fuse"


def _split(**kw: Any) -> Callable[[], tuple[Any, ...]]:
    def make() -> tuple[Any, ...]:
        wl, s, args = matmul()
        i, j = s["C"].op.axis
        return s, args, lambda: s["C"].split(i, **kw), "split"

    return make


def _split_twice() -> tuple[Any, ...]:
    wl, s, args = matmul()
    i, j = s["C"].op.axis
    s["C"].split(i, factor=4)
    return s, args, lambda: s["C"].split(i, factor=2), "split"


def _split_unknown_axis() -> tuple[Any, ...]:
    wl, s, args = matmul()
    return s, args, lambda: s["C"].split("nope", factor=2), "split"


def _split_placeholder() -> tuple[Any, ...]:
    wl, s, args = matmul()
    return s, args, lambda: s["A"].split("i", factor=2), "split"


def _reorder_repeated() -> tuple[Any, ...]:
    wl, s, args = matmul()
    i, j = s["C"].op.axis
    return s, args, lambda: s["C"].reorder(i, j, i), "reorder"


def _reorder_split_axis() -> tuple[Any, ...]:
    wl, s, args = matmul()
    i, j = s["C"].op.axis
    io, ii = s["C"].split(i, factor=4)
    return s, args, lambda: s["C"].reorder(j, i), "reorder"


def _reorder_unknown() -> tuple[Any, ...]:
    wl, s, args = matmul()
    i, j = s["C"].op.axis
    return s, args, lambda: s["C"].reorder(j, "zz"), "reorder"


def _compute_at_non_consumer() -> tuple[Any, ...]:
    X = asc.placeholder((8,), name="X")
    Y1 = asc.compute((8,), lambda i: X[i] + 1.0, name="Y1")
    Y2 = asc.compute((8,), lambda i: X[i] * 2.0, name="Y2")
    Z = asc.compute((8,), lambda i: Y1[i] + Y2[i], name="Z")
    s = asc.create_schedule(Z)
    return s, [X, Z], lambda: s[Y1].compute_at(s[Y2], s[Y2].op.axis[0]), "compute_at"


def _compute_at_producer() -> tuple[Any, ...]:
    wl, s, args = conv()
    n, c, h, w = s["pad"].op.axis
    return s, args, lambda: s["conv"].compute_at(s["pad"], h), "compute_at"


def _compute_at_missing_loop() -> tuple[Any, ...]:
    wl, s, args = conv()
    return s, args, lambda: s["pad"].compute_at(s["conv"], "nope"), "compute_at"


def _compute_at_split_loop() -> tuple[Any, ...]:
    wl, s, args = conv()
    n, f, y, x = s["conv"].op.axis
    s["conv"].split(y, factor=2)
    return s, args, lambda: s["pad"].compute_at(s["conv"], y), "compute_at"


def _compute_at_output() -> tuple[Any, ...]:
    wl, s, args = conv()
    n, c, h, w = s["pad"].op.axis
    return s, args, lambda: s["conv"].compute_at(s["conv"], s["conv"].op.axis[0]), "compute_at"


def _compute_at_placeholder() -> tuple[Any, ...]:
    wl, s, args = conv()
    return s, args, lambda: s["data"].compute_at(s["conv"], s["conv"].op.axis[0]), "compute_at"


def test_compute_at_a_loop_that_misses_a_consumer_fails_at_lowering() -> None:
    """expval is read by expsum and softmax; computing it inside expsum's loop leaves softmax out.
    As in TVM, the step is accepted (a later compute_at could move softmax) and lowering refuses."""
    wl, s, args = softmax()
    s["expval"].compute_at(s["expsum"], s["expsum"].op.axis[0])
    with pytest.raises(asc.ScheduleError, match="not computed inside that loop"):
        asc.lower(s, args)


def _compute_inline_output() -> tuple[Any, ...]:
    wl, s, args = matmul()
    return s, args, lambda: s["C"].compute_inline(), "compute_inline"


def _compute_inline_reduction() -> tuple[Any, ...]:
    wl = asc.get_workload("dense", (5, 6, 7))
    s = asc.create_schedule(wl.outputs)
    return s, wl.tensors(), lambda: s["dense"].compute_inline(), "compute_inline"


def _compute_inline_softmax_reduction() -> tuple[Any, ...]:
    wl, s, args = softmax()
    return s, args, lambda: s["maxelem"].compute_inline(), "compute_inline"


def _compute_inline_with_attached() -> tuple[Any, ...]:
    wl, s, args = softmax()
    i, j = s["expval"].op.axis
    s["maxelem"].compute_at(s["expval"], i)
    return s, args, lambda: s["expval"].compute_inline(), "compute_inline"


def _cache_write_after_split() -> tuple[Any, ...]:
    wl, s, args = matmul()
    i, j = s["C"].op.axis
    s["C"].split(i, factor=4)
    return s, args, lambda: s.cache_write(wl.outputs[0], "local"), "cache_write"


def _cache_write_after_annotate() -> tuple[Any, ...]:
    wl, s, args = matmul()
    i, j = s["C"].op.axis
    s["C"].unroll(j)
    return s, args, lambda: s.cache_write(wl.outputs[0], "local"), "cache_write"


def _cache_write_bad_scope() -> tuple[Any, ...]:
    wl, s, args = matmul()
    return s, args, lambda: s.cache_write(wl.outputs[0], "texture"), "cache_write"


def _cache_read_not_a_reader() -> tuple[Any, ...]:
    wl = asc.get_workload("dense", (5, 6, 7))
    s = asc.create_schedule(wl.outputs)
    data, weight, bias, out = wl.tensors()
    return s, wl.tensors(), lambda: s.cache_read(weight, "local", [out]), "cache_read"


def _cache_read_no_readers() -> tuple[Any, ...]:
    wl, s, args = matmul()
    return s, args, lambda: s.cache_read(args[1], "local", []), "cache_read"


def _annotate_unknown() -> tuple[Any, ...]:
    wl, s, args = matmul()
    return s, args, lambda: s.apply(S.AnnotateStep("C", "j", "tensorize")), "annotate"


def _annotate_twice() -> tuple[Any, ...]:
    wl, s, args = matmul()
    i, j = s["C"].op.axis
    s["C"].vectorize(j)
    return s, args, lambda: s["C"].unroll(j), "annotate"


def _pragma_unknown() -> tuple[Any, ...]:
    wl, s, args = matmul()
    i, j = s["C"].op.axis
    return s, args, lambda: s["C"].pragma(i, "unroll_explicit", 1), "pragma"


def _pragma_negative() -> tuple[Any, ...]:
    wl, s, args = matmul()
    i, j = s["C"].op.axis
    return s, args, lambda: s["C"].pragma(i, "auto_unroll_max_step", -1), "pragma"


def _bind_unknown_tag() -> tuple[Any, ...]:
    wl, s, args = matmul()
    i, j = s["C"].op.axis
    return s, args, lambda: s["C"].bind(i, "threadIdx.w"), "bind|thread_axis"


def _bind_reduce() -> tuple[Any, ...]:
    wl, s, args = matmul()
    (k,) = s["C"].op.reduce_axis
    # threadIdx is a cross-thread reduction; a block index would race on the output
    return s, args, lambda: s["C"].bind(k, asc.thread_axis("blockIdx.x")), "bind"


def _rfactor_data_axis() -> tuple[Any, ...]:
    wl, s, args = matmul()
    i, j = s["C"].op.axis
    return s, args, lambda: s.rfactor(wl.outputs[0], i), "rfactor"


def _rfactor_bad_factor_axis() -> tuple[Any, ...]:
    wl, s, args = matmul()
    (k,) = s["C"].op.reduce_axis
    return s, args, lambda: s.rfactor(wl.outputs[0], k, factor_axis=5), "rfactor"


def _rfactor_not_reduction() -> tuple[Any, ...]:
    wl = asc.get_workload("dense", (5, 6, 7))
    s = asc.create_schedule(wl.outputs)
    return s, wl.tensors(), lambda: s.rfactor(wl.outputs[0], "i"), "rfactor"


def _unknown_stage_step() -> tuple[Any, ...]:
    wl, s, args = matmul()
    return s, args, lambda: s.apply(S.SplitStep("nope", "i", 2, None)), "split"


ILLEGAL: dict[str, Callable[[], tuple[Any, ...]]] = {
    "vectorize_reduce": _vectorize_reduce,
    "parallel_reduce": _parallel_reduce,
    "parallel_split_reduce": _parallel_split_reduce,
    "vectorize_fused_reduce": _vectorize_fused_reduce,
    "fuse_non_adjacent": _fuse_non_adjacent,
    "fuse_wrong_order": _fuse_wrong_order,
    "fuse_data_with_reduce": _fuse_data_reduce,
    "fuse_one_axis": _fuse_one_axis,
    "fuse_split_axis": _fuse_split_axis,
    "split_factor_0": _split(factor=0),
    "split_factor_-1": _split(factor=-1),
    "split_nparts_0": _split(nparts=0),
    "split_none_none": _split(),
    "split_both": _split(factor=2, nparts=2),
    "split_factor_bool": _split(factor=True),
    "split_factor_float": _split(factor=2.0),
    "split_factor_str": _split(factor="2"),
    "split_twice": _split_twice,
    "split_unknown_axis": _split_unknown_axis,
    "split_placeholder": _split_placeholder,
    "reorder_repeated": _reorder_repeated,
    "reorder_split_axis": _reorder_split_axis,
    "reorder_unknown": _reorder_unknown,
    "compute_at_non_consumer": _compute_at_non_consumer,
    "compute_at_producer": _compute_at_producer,
    "compute_at_missing_loop": _compute_at_missing_loop,
    "compute_at_split_loop": _compute_at_split_loop,
    "compute_at_output": _compute_at_output,
    "compute_at_placeholder": _compute_at_placeholder,
    "compute_inline_output": _compute_inline_output,
    "compute_inline_reduction": _compute_inline_reduction,
    "compute_inline_softmax_reduction": _compute_inline_softmax_reduction,
    "compute_inline_with_attached": _compute_inline_with_attached,
    "cache_write_after_split": _cache_write_after_split,
    "cache_write_after_annotate": _cache_write_after_annotate,
    "cache_write_bad_scope": _cache_write_bad_scope,
    "cache_read_not_a_reader": _cache_read_not_a_reader,
    "cache_read_no_readers": _cache_read_no_readers,
    "annotate_unknown": _annotate_unknown,
    "annotate_twice": _annotate_twice,
    "pragma_unknown": _pragma_unknown,
    "pragma_negative": _pragma_negative,
    "bind_unknown_tag": _bind_unknown_tag,
    "bind_reduce": _bind_reduce,
    "rfactor_data_axis": _rfactor_data_axis,
    "rfactor_bad_factor_axis": _rfactor_bad_factor_axis,
    "rfactor_not_reduction": _rfactor_not_reduction,
    "unknown_stage": _unknown_stage_step,
}


@pytest.mark.parametrize("name", list(ILLEGAL))
def test_illegal_step_is_rejected_and_changes_nothing(name: str) -> None:
    s, args, request, words = ILLEGAL[name]()
    assert_rejected(s, args, request, words)


def test_rejected_step_leaves_a_working_schedule() -> None:
    """After a series of rejected steps, the schedule builds and computes the right answer."""
    wl, s, args = matmul(17, 13, 11)
    C = s["C"]
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    io, jo, ii, ji = C.tile(i, j, 4, 4)
    for request in (lambda: C.vectorize(k), lambda: C.fuse(io, ii), lambda: C.split(ji, factor=0),
                    lambda: C.reorder(io, io), lambda: C.compute_inline()):
        assert_rejected(s, args, request, r"\w")
    C.vectorize(ji)
    check_against_reference(wl, s)


def test_tile_with_an_illegal_factor_changes_nothing() -> None:
    """tile is one primitive: an illegal second factor must not leave the first split applied."""
    wl, s, args = matmul()
    i, j = s["C"].op.axis
    assert_rejected(s, args, lambda: s["C"].tile(i, j, 4, 0), "split|tile")


def test_thread_axis_unknown_tag() -> None:
    with pytest.raises(asc.ScheduleError, match="thread_axis"):
        asc.thread_axis("threadIdx.q")


def test_unknown_stage_lookup() -> None:
    wl, s, args = matmul()
    with pytest.raises(asc.ScheduleError, match="nope"):
        s["nope"]


# ------------------------------------------------------------------------------ illegal at build time


def test_bind_on_cpu_target_rejected_at_build() -> None:
    wl, s, args = matmul()
    i, j = s["C"].op.axis
    s["C"].bind(i, asc.thread_axis("blockIdx.x"))
    s["C"].bind(j, asc.thread_axis("threadIdx.x"))
    # lowering knows no target: it shows the kernel with its launch dimensions
    assert "blockIdx.x" in str(asc.lower(s, args))
    assert_build_rejected(s, args, "bind", lower=False)


def test_nested_parallel_rejected_at_build() -> None:
    wl, s, args = matmul()
    i, j = s["C"].op.axis
    s["C"].parallel(i)
    s["C"].parallel(j)
    assert_build_rejected(s, args, "parallel", target="c -num-threads=2")


def test_parallel_inside_vectorized_rejected_at_build() -> None:
    wl, s, args = matmul()
    i, j = s["C"].op.axis
    s["C"].vectorize(i)
    s["C"].parallel(j)
    assert_build_rejected(s, args, "parallel")


def test_parallel_stage_inside_parallel_loop_rejected_at_build() -> None:
    """Nested parallelism across stages: a cache stage with a parallel loop computed inside the
    output's parallel loop."""
    wl, s, args = matmul()
    C = wl.outputs[0]
    CC = s.cache_write(C, "local")
    i, j = s[C].op.axis
    s[C].parallel(i)
    s[CC].compute_at(s[C], i)
    ci, cj = s[CC].op.axis
    s[CC].parallel(cj)
    assert_build_rejected(s, args, "parallel", target="c -num-threads=2")


def test_compute_at_without_consumer_inside_rejected_at_build() -> None:
    """maxelem at softmax's row while its consumer expval stays at the root: the loop that needs
    maxelem does not run inside softmax's row, so there is no legal program."""
    wl, s, args = softmax()
    i, j = s["softmax"].op.axis
    s["maxelem"].compute_at(s["softmax"], i)
    assert_build_rejected(s, args, r"compute_at|computed at")


def test_pack_inside_consumer_attach_loop_rejected_or_correct() -> None:
    """B packed at a loop INSIDE the loop where its reader C.local is computed: C.local would read
    the pack before it is written. Either reject it (ScheduleError naming compute_at) or compute
    the right answer; never a wrong answer or a crash."""
    wl, s, args = matmul(16, 16, 8)
    A, B, C = args
    CC = s.cache_write(C, "local")
    BL = s.cache_read(B, "local", [CC])
    i, j = s[C].op.axis
    io, jo, ii, ji = s[C].tile(i, j, 4, 4)
    s[CC].compute_at(s[C], io)
    s[BL].compute_at(s[C], ii)
    try:
        asc.lower(s, args)
    except asc.ScheduleError as err:
        assert re.search(r"compute_at|computed at", str(err)), str(err)
        return
    check_against_reference(wl, s)


def test_split_of_attach_loop_rejected_or_correct() -> None:
    """Splitting the loop another stage is computed at, after the compute_at: either reject it or
    keep computing the right answer."""
    wl, s, args = conv()
    n, f, y, x = s["conv"].op.axis
    s["pad"].compute_at(s["conv"], y)
    try:
        s["conv"].split(y, factor=2)
    except asc.ScheduleError as err:
        assert "split" in str(err)
        return
    try:
        asc.lower(s, args)
    except asc.ScheduleError as err:
        assert re.search(r"compute_at|computed at|split", str(err)), str(err)
        return
    check_against_reference(wl, s)


# ------------------------------------------------------------------------------ illegal: random


Request = tuple[Callable[[], object], str]


def _illegal_requests(s: asc.Schedule, stage: asc.Stage, output: asc.Tensor) -> dict[str, Request]:
    """Illegal requests that apply to ``stage`` in its current state, by name."""
    leaves = leaf_names(stage)
    reduce = [a for a in leaves if kind(stage, a) == "reduce"]
    data = [a for a in leaves if kind(stage, a) == "data"]
    out: dict[str, Request | None] = {
        "split_factor_0": (lambda: stage.split(leaves[-1], factor=0), "split"),
        "split_nparts_-1": (lambda: stage.split(leaves[0], nparts=-1), "split"),
        "split_none_none": (lambda: stage.split(leaves[0]), "split"),
        "reorder_repeated": (lambda: stage.reorder(leaves[0], leaves[0]), "reorder"),
        "compute_at_output": (lambda: s[output].compute_at(stage, leaves[0]), "compute_at"),
        "compute_at_missing_loop": (lambda: s[output].compute_at(stage, "no_such_loop"), "compute_at"),
        "compute_inline_output": (lambda: s[output].compute_inline(), "compute_inline"),
        "unknown_annotation": (lambda: s.apply(S.AnnotateStep(stage.name, leaves[0], "tensorize")),
                               "annotate"),
        "unknown_pragma": (lambda: stage.pragma(leaves[0], "no_such_pragma", 1), "pragma"),
        "rfactor_data_axis": ((lambda: s.rfactor(stage.op.output(0), data[0]), "rfactor") if data else None),
    }
    gone = [r.parent for r in stage.relations if hasattr(r, "parent")]
    if gone:
        out["reorder_split_axis"] = (lambda: stage.reorder(gone[0]), "reorder")
        out["split_split_axis"] = (lambda: stage.split(gone[0], factor=2), "split")
    if stage.relations and stage.name == output.name and f"{output.name}.local" not in s.stages:
        out["cache_write_after_split"] = (lambda: s.cache_write(output, "local"), "cache_write")
    if reduce:
        out["vectorize_reduce"] = (lambda: stage.vectorize(reduce[0]), "annotate|vectorize")
        out["parallel_reduce"] = (lambda: stage.parallel(reduce[-1]), "annotate|parallel")
    for a, b in zip(leaves, leaves[1:], strict=False):
        if kind(stage, a) != kind(stage, b):
            out["fuse_data_reduce"] = (lambda a=a, b=b: stage.fuse(a, b), "fuse")
            break
    if len(leaves) >= 3:
        out["fuse_non_adjacent"] = (lambda: stage.fuse(leaves[0], leaves[2]), "fuse")
    if len(leaves) >= 2:
        out["fuse_reversed"] = (lambda: stage.fuse(leaves[1], leaves[0]), "fuse")
    return {k: v for k, v in out.items() if v is not None}


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), op=st.sampled_from(sorted(DRAWERS)))
def test_random_illegal_step_after_legal_prefix(data: st.DataObject, op: str) -> None:
    """A random legal schedule, then a random illegal request on one of its stages: rejected with
    the step named, nothing changed (steps, stages, emitted C)."""
    wl, s, target = DRAWERS[op](data.draw)
    args = wl.tensors()
    (output,) = wl.outputs
    candidates = [st_ for st_ in s.stages.values() if not st_.is_placeholder]
    stage = data.draw(st.sampled_from(candidates), label="stage")
    requests = _illegal_requests(s, stage, output)
    name = data.draw(st.sampled_from(sorted(requests)), label="illegal request")
    request, words = requests[name]
    note(f"{describe(s.steps, workload=wl, target=target)}; then {name} on {stage.name}")
    assert_rejected(s, args, request, words)
