"""Knob spaces (autosched.space.knobs) and the CPU templates (autosched.space.templates).

Every template is sampled 200 times on a shape its tiles do not divide (and 50 times on one they
do). Every sampled config is instantiated, lowered and emitted, and its steps go through JSON and
are replayed on a fresh DAG, which must emit the same C. Every config on the non-dividing shape
(one in ten on the dividing one) is also built with gcc and checked against the numpy reference.
"""

from __future__ import annotations

import json
import math
import os
import re

import numpy as np
import pytest
from repro import reproducible
from schedule_cases import check_against_reference

import autosched as asc
from autosched.ops.schedules import conv2d_nchw_cpu, matmul_cpu
from autosched.schedule.steps import AnnotateStep, SplitStep
from autosched.space.knobs import AnnotateEntity, ConfigEntity, ConfigSpace, SplitEntity
from autosched.space.templates import (
    get_template,
    instantiate,
    list_templates,
    register_template,
    template_space,
)
from autosched.space.templates.__main__ import main as list_spaces
from autosched.space.templates.handwritten import hand_written_config

TARGET = "c -num-threads=2"

# ------------------------------------------------------------------------------- knob spaces


@pytest.mark.parametrize(
    ("extent", "num_outputs", "policy", "max_factor", "size"),
    [
        (256, 3, "factors", None, 45),
        (256, 2, "factors", None, 9),
        (256, 4, "factors", None, 165),
        (12, 3, "factors", None, 18),
        (37, 2, "factors", None, 2),
        (256, 3, "factors", 16, 25),
        (256, 2, "power2", None, 9),
        (256, 3, "power2", None, 45),
        (37, 2, "power2", None, 6),
        (37, 3, "power2", None, 21),
        (37, 2, "power2", 8, 4),
        (1, 3, "factors", None, 1),
    ],
)
def test_split_sizes_are_pinned(
    extent: int, num_outputs: int, policy: str, max_factor: int | None, size: int
) -> None:
    space = ConfigSpace()
    space.define_split("s", extent, num_outputs, policy=policy, max_factor=max_factor)
    assert space.knobs == {"s": size}
    for e in space.knob("s").entities:
        assert isinstance(e, SplitEntity) and len(e.size) == num_outputs
        inner = math.prod(e.size[1:])
        assert e.size[0] == -(-extent // inner)
        if policy == "factors":
            assert math.prod(e.size) == extent
        else:
            assert all(f & (f - 1) == 0 for f in e.size[1:]) and inner <= extent
        assert max_factor is None or max(e.size[1:]) <= max_factor


def test_split_candidates_compute_the_outer_factor() -> None:
    space = ConfigSpace()
    space.define_split(
        "s", 37, 3, policy="candidate", candidate=[(-1, 1, 6), (None, 2, 8), (7, 1, 6), (1, 4, 16)]
    )
    assert [e.to_json() for e in space.knob("s").entities] == [[7, 1, 6], [3, 2, 8], [1, 4, 16]]
    with pytest.raises(ValueError, match="outer factor must be 7"):
        ConfigSpace().define_split("s", 37, 3, policy="candidate", candidate=[(5, 1, 6)])
    with pytest.raises(ValueError, match="3 factors"):
        ConfigSpace().define_split("s", 37, 3, policy="candidate", candidate=[(-1, 6)])


def test_reorder_annotate_and_plain_knob_sizes() -> None:
    space = ConfigSpace()
    space.define_reorder("r", 3)
    space.define_reorder("rc", ["a", "b"], policy="candidate", candidate=[(1, 0), (1, 0), (0, 1)])
    space.define_annotate("u", 3, policy="try_unroll")
    space.define_annotate("v", 3, policy="try_vec")
    space.define_annotate("uv", 3, policy="try_unroll_vec")
    space.define_knob("k", [0, 16, 64, 512])
    assert space.knobs == {"r": 6, "rc": 2, "u": 8, "v": 2, "uv": 12, "k": 4}
    assert len(space) == 6 * 2 * 8 * 2 * 12 * 4
    assert [e.to_json() for e in space.knob("rc").entities] == [[1, 0], [0, 1]]


def test_bad_definitions_raise() -> None:
    space = ConfigSpace()
    space.define_knob("k", [1, 2])
    with pytest.raises(ValueError, match="defined twice"):
        space.define_knob("k", [3])
    with pytest.raises(ValueError, match="unknown split policy"):
        space.define_split("s", 16, policy="nope")
    with pytest.raises(ValueError, match="positive extent"):
        space.define_split("s", 0)
    with pytest.raises(ValueError, match="not a permutation"):
        space.define_reorder("r", 2, policy="candidate", candidate=[(0, 0)])
    with pytest.raises(ValueError, match="values repeat"):
        space.define_knob("v", [1, 1])
    with pytest.raises(KeyError, match="no knob"):
        space.knob("missing")


def _small_space() -> ConfigSpace:
    space = ConfigSpace()
    space.define_split("tile", 24, 3)
    space.define_reorder("order", 3)
    space.define_annotate("ann", 2, policy="try_unroll_vec")
    space.define_knob("flag", [False, True, "x"])
    return space


def test_index_dict_json_round_trips() -> None:
    space = _small_space()
    assert len(space) == 30 * 6 * 6 * 3
    seen = set()
    for cfg in space:
        values = json.loads(json.dumps(cfg.to_dict()))
        assert space.from_dict(values).index == cfg.index
        assert space.from_json(json.loads(json.dumps(cfg.to_json()))) == cfg
        assert space.get(cfg.index).to_dict() == cfg.to_dict()
        seen.add(json.dumps(values))
    assert len(seen) == len(space)
    assert space.get(0).to_dict() == {k: space[k].to_json() for k in space.knobs}
    with pytest.raises(IndexError):
        space.get(len(space))
    with pytest.raises(ValueError, match="does not match"):
        space.from_json({"index": 1, "knobs": space.get(0).to_dict()})
    with pytest.raises(ValueError, match="missing"):
        space.from_dict({"tile": [24, 1, 1]})
    with pytest.raises(ValueError, match="no value"):
        space.from_dict({**space.get(0).to_dict(), "tile": [5, 5, 5]})


def test_sample_draws_distinct_configs() -> None:
    space = _small_space()
    picked = space.sample(np.random.default_rng(3), 200)
    assert len({c.index for c in picked}) == 200
    assert [c.index for c in space.sample(7, 50)] == [c.index for c in space.sample(7, 50)]
    assert sorted(c.index for c in space.sample(0, 10**6)) == list(range(len(space)))
    big = ConfigSpace()
    for n in range(8):
        big.define_split(f"s{n}", 1024, 4)
    assert big.size == 286**8  # len() cannot report sizes past sys.maxsize
    assert len({c.index for c in big.sample(1, 100)}) == 100


@pytest.mark.requires("gcc")
def test_entities_apply_to_a_schedule() -> None:
    wl = asc.get_workload("matmul", (37, 29, 23))
    space = ConfigSpace()
    space.define_split("tile", 37, 3, policy="power2")
    C = wl.outputs[0]
    s = asc.create_schedule(C)
    i, j = s[C].op.axis
    entity = space.knob("tile").entities[-1]
    assert isinstance(entity, SplitEntity)
    loops = entity.apply(s, C, i)
    assert [lv.name for lv in loops] == ["i.outer", "i.inner.outer", "i.inner.inner"]
    jo, ji = s[C].split(j, 8)
    AnnotateEntity(("unroll", "unroll")).apply(s, C, [jo, ji], [4, 8], max_unroll=16)
    assert s[C].annotations == {"j.inner": "unroll"}
    check_against_reference(wl, s, TARGET)


def test_a_config_checks_the_template_definitions() -> None:
    space = ConfigSpace()
    space.define_split("s", 16, 2)
    cfg = space.get(1)
    cfg.define_split("s", 16, 2)
    with pytest.raises(ValueError, match="defined as"):
        cfg.define_split("s", 32, 2)
    with pytest.raises(KeyError):
        cfg.define_knob("other", [1])


# ------------------------------------------------------------------------------- templates

TEMPLATES = {"matmul", "batch_matmul", "dense", "conv2d_nchw", "conv2d_nhwc", "depthwise_conv2d_nchw"}

# (workload, args that the tiles do not divide, args that they do)
SHAPES = {
    "matmul": ("matmul", (37, 29, 23), (64, 48, 32)),
    "matmul_t": ("matmul", (37, 29, 23, "float32", True), (32, 48, 64, "float32", True)),
    "batch_matmul": ("batch_matmul", (3, 37, 29, 23), (2, 32, 48, 16)),
    "dense": ("dense", (37, 29, 23), (16, 64, 48)),
    "conv2d_nchw": ("conv2d_nchw", (1, 5, 9, 11, 6, 3, 3, 2, 1), (1, 8, 14, 14, 16, 3, 3, 1, 1)),
    "conv2d_nhwc": ("conv2d_nhwc", (1, 9, 11, 5, 6, 3, 3, 2, 1), (1, 14, 14, 8, 16, 3, 3, 1, 1)),
    "depthwise": ("depthwise_conv2d_nchw", (1, 7, 10, 10, 3, 3, 1, 1), (1, 16, 14, 14, 3, 3, 2, 1)),
}
#: configs per template on an odd shape, each built and checked (by default 50; more with
#: AUTOSCHED_RANDOM_PROGRAMS=N, in chunks of 50, the last one partial); on an even shape every
#: tenth of 50 is built
ODD_CONFIGS = int(os.environ.get("AUTOSCHED_RANDOM_PROGRAMS", "50"))
ODD_BUILD_EVERY, EVEN_CONFIGS, EVEN_BUILD_EVERY, CHUNK = 1, 50, 10, 50
SAMPLES = [
    (case, shape, chunk)
    for case in SHAPES
    for shape, total in (("odd", ODD_CONFIGS), ("even", EVEN_CONFIGS))
    for chunk in range(-(-total // CHUNK))
]


def test_every_template_is_registered_and_sampled() -> None:
    assert {t.workload for t in list_templates() if t.target_kind == "c"} >= TEMPLATES
    assert {name for name, _, _ in SHAPES.values()} == TEMPLATES
    with pytest.raises(KeyError, match="no template"):
        get_template("softmax", TARGET)
    with pytest.raises(ValueError, match="already registered"):
        register_template("matmul", "c")(get_template("matmul"))


@pytest.mark.requires("gcc")
@pytest.mark.parametrize(("case", "shape", "chunk"), SAMPLES, ids=[f"{c}-{s}-{k}" for c, s, k in SAMPLES])
def test_sampled_configs_are_valid_correct_and_replayable(case: str, shape: str, chunk: int) -> None:
    name, odd, even = SHAPES[case]
    args, total, every = (
        (odd, ODD_CONFIGS, ODD_BUILD_EVERY) if shape == "odd" else (even, EVEN_CONFIGS, EVEN_BUILD_EVERY)
    )
    wl = asc.get_workload(name, args)
    space = template_space(wl, TARGET)
    configs = space.sample(np.random.default_rng(2026), total)[chunk * CHUNK : (chunk + 1) * CHUNK]
    fresh = asc.get_workload(name, args)  # its own tensors: replay must not need the original DAG
    for pos, cfg in enumerate(configs, start=chunk * CHUNK):
        s = instantiate(wl, TARGET, cfg)
        with reproducible(s.steps, seed=2026, sample=pos, config=cfg.to_dict()):
            source = asc.emit(s, wl.tensors(), TARGET)
            steps = asc.steps_from_json(json.loads(json.dumps(asc.steps_to_json(s.steps))))
            again = asc.Schedule.replay(fresh.outputs, steps)
            assert asc.emit(again, fresh.tensors(), TARGET) == source, cfg
            if pos % every == 0:
                check_against_reference(wl, s, TARGET)


def test_instantiate_takes_an_index_or_knob_values() -> None:
    wl = asc.get_workload("conv2d_nchw", SHAPES["conv2d_nchw"][1])
    space = template_space(wl, TARGET)
    cfg = space.get(len(space) // 3)
    by_entity, by_index = instantiate(wl, TARGET, cfg), instantiate(wl, TARGET, cfg.index)
    by_values = instantiate(wl, TARGET, json.loads(json.dumps(cfg.to_dict())))
    assert by_entity.steps == by_index.steps == by_values.steps


@pytest.mark.requires("gcc")
def test_a_user_template_for_a_user_workload() -> None:
    @asc.workload("test.scale_rows", override=True)
    def scale_rows(n: int, m: int) -> list[asc.Tensor]:
        X = asc.placeholder((n, m), name="X")
        return [X, asc.compute((n, m), lambda i, j: X[i, j] * 2.0, name="Y")]

    @register_template("test.scale_rows", "c", override=True)
    def template(
        cfg: ConfigEntity | ConfigSpace, tensors: list[asc.Tensor], target: asc.Target
    ) -> asc.Schedule:
        Y = tensors[-1]
        s = asc.create_schedule(Y)
        cfg.define_split("tile_j", Y.shape[1], 2, policy="power2")
        cfg.define_knob("vectorize", [False, True])
        jo, ji = cfg["tile_j"].apply(s, Y, s[Y].op.axis[1])
        if cfg["vectorize"].val:
            s[Y].vectorize(ji)
        return s

    wl = asc.get_workload("test.scale_rows", (5, 40))
    space = template_space(wl, TARGET)
    assert space.knobs == {"tile_j": 6, "vectorize": 2}
    factors = set()
    for cfg in space:  # each config is the program its knobs say, and computes the reference
        s = instantiate(wl, TARGET, cfg)
        (split,) = [st for st in s.steps if isinstance(st, SplitStep)]
        assert (split.stage, split.axis, split.factor) == ("Y", "j", cfg["tile_j"].size[-1])
        vectorized = [st.axis for st in s.steps if isinstance(st, AnnotateStep)]
        assert vectorized == (["j.inner"] if cfg["vectorize"].val else [])
        factors.add(split.factor)
        check_against_reference(wl, s, TARGET)
    assert factors == {1, 2, 4, 8, 16, 32}


def test_space_sizes_are_listed(capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m autosched.space.templates``; run pytest with ``-s`` to read the sizes."""
    assert list_spaces([]) == 0
    out = capsys.readouterr().out
    for name in TEMPLATES:
        assert f"  {name} " in out
    assert re.search(r"matmul\(1024,1024,1024,'float32',False\)\s+[\d,]+\s+tile_i", out)
    with capsys.disabled():
        print("\n" + out)


# ------------------------------------------------------------------ hand-written schedules


def _canonical(source: str) -> str:
    """C source with its loop variables renamed in order of appearance (v0, v1, ...)."""
    names = list(dict.fromkeys(re.findall(r"for \(int (\w+) = ", source)))
    for n, name in enumerate(names):
        source = re.sub(rf"\b{name}\b", f"v{n}", source)
    return source


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


# the knob values of ops/schedules.py's schedules (6 x 64 matmul tile, 6 channels x 56 columns
# conv tile, on 64-byte vectors), and the workloads they were written for
HAND_WRITTEN = {
    "matmul": (
        matmul_cpu,
        (1024, 1024, 1024),
        {
            "tile_i": [_ceil(1024, 6), 1, 6],
            "tile_j": [16, 1, 64],
            "tile_k": [1, 256, 4],
            "reorder_outer": [1, 0],
            "reorder_acc": [0, 1, 2],
            "unroll_acc": ["unroll", "unroll"],
            "pack_b": 1,
        },
    ),
    "conv2d_nchw": (
        conv2d_nchw_cpu,
        (1, 64, 56, 56, 64, 3, 3, 1, 1),
        {
            "tile_k": [_ceil(64, 6), 1, 6],
            "tile_y": [56, 1],
            "tile_x": [1, 1, 56],
            "reorder_acc": [0, 1, 2, 3],
            "tile_rc": [1, 64],
            "reorder_reduce": [0, 1, 2],
            "unroll_window": ["none", "unroll"],
            "pad": "root",
        },
    ),
}


@pytest.mark.requires("gcc")
@pytest.mark.parametrize(
    ("name", "threads"),
    [("matmul", 1), ("matmul", 2), ("conv2d_nchw", 1)],
    ids=["matmul-1", "matmul-2", "conv-1"],
)
def test_hand_written_schedules_are_points_of_the_templates(name: str, threads: int) -> None:
    """The hand-written schedule is a config of the template: the same C, modulo loop names; and
    ``hand_written_config`` finds that config."""
    hand, args, values = HAND_WRITTEN[name]
    target = f"c -num-threads={threads} -vector-bytes=64"
    wl = asc.get_workload(name, args)
    cfg = template_space(wl, target).from_dict(values | ({"parallel": 1} if threads > 1 else {}))
    found = hand_written_config(wl, target)
    assert found is not None and found.index == cfg.index
    s = instantiate(wl, target, cfg)
    ours = asc.emit(s, wl.tensors(), target)
    assert _canonical(ours) == _canonical(asc.emit(hand(wl.tensors(), target), wl.tensors(), target))
    check_against_reference(wl, s, target)


@pytest.mark.parametrize(
    ("name", "args", "target"),
    [
        ("matmul", (512, 512, 512), "c -num-threads=2 -vector-bytes=32"),
        ("matmul", (100, 72, 36), "c -num-threads=1 -vector-bytes=32"),
        ("conv2d_nchw", (1, 64, 56, 56, 64, 3, 3, 1, 1), "c -num-threads=2 -vector-bytes=32"),
        ("conv2d_nchw", (1, 128, 28, 28, 128, 3, 3, 1, 1), "c -num-threads=2 -vector-bytes=32"),
        ("conv2d_nchw", (1, 32, 14, 14, 48, 3, 3, 2, 1), "c -num-threads=1 -vector-bytes=32"),
        ("conv2d_nchw", (1, 16, 9, 9, 8, 1, 1, 1, 0), "c -num-threads=1 -vector-bytes=16"),
    ],
    ids=["mm512", "mm-odd", "conv64", "conv128", "conv-stride2", "conv-1x1"],
)
def test_hand_written_config_is_the_hand_written_schedule(
    name: str, args: tuple[int, ...], target: str
) -> None:
    """On other shapes and vector widths too: the config's C is the hand-written schedule's."""
    hand = HAND_WRITTEN[name][0]
    wl = asc.get_workload(name, args)
    cfg = hand_written_config(wl, target)
    assert cfg is not None
    ours = asc.emit(instantiate(wl, target, cfg), wl.tensors(), target)
    assert _canonical(ours) == _canonical(asc.emit(hand(wl.tensors(), target), wl.tensors(), target))


def test_no_hand_written_config_where_there_is_none() -> None:
    assert hand_written_config(asc.get_workload("matmul", (64, 64, 64, "float32", True))) is None  # B.T
    assert hand_written_config(asc.get_workload("dense", (8, 16, 32))) is None
    conv3 = asc.get_workload("conv2d_nchw", (1, 3, 16, 16, 8, 3, 3, 1, 1))  # 3 channels: no power of 2
    assert hand_written_config(conv3, "c -num-threads=1") is None
