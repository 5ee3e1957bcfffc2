"""Auto-tensorization: a user's own int8 matmul, batched matmul or NHWC convolution, written with no
schedule, gets a sketch that lays its weight out for the dot-product intrinsics (``dot_layout``)
and tensorizes its blocks; programs drawn from it equal numpy's int32 results on shapes whose rows
do not divide the blocks (strides, padding); the search finds it, and its record replays in a
fresh process."""

from __future__ import annotations

import gzip
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import autosched as asc
from autosched.boards import RemoteBuilder
from autosched.expr import Expr, Var
from autosched.records import append_records
from autosched.runner.measure import MeasureErrorNo, MeasureInput
from autosched.schedule import ScheduleError
from autosched.schedule.steps import Step
from autosched.space.generated import SketchSpace
from autosched.space.tensorize import DOT_FALLBACK, legal_rows, mr_choices

AVX2 = "c -num-threads=2 -mattr=avx2"  # the rule follows the target's extensions, not this CPU's
RNG = np.random.default_rng(11)


def int8_matmul(m: int, n: int, k: int, *, transposed: bool = False, swapped: bool = False,
                a_dtype: str = "uint8", b_dtype: str = "int8") -> list[asc.Tensor]:  # fmt: skip
    A = asc.placeholder((m, k), a_dtype, name="A")
    W = asc.placeholder((n, k) if transposed else (k, n), b_dtype, name="W")
    r = asc.reduce_axis(k, name="r")

    def body(i: Var, j: Var) -> Expr:
        a, w = A[i, r].astype("int32"), (W[j, r] if transposed else W[r, j]).astype("int32")
        return asc.sum(w * a if swapped else a * w, axis=r)

    return [A, W, asc.compute((m, n), body, name="C")]


def _operands(m: int, n: int, k: int, transposed: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a = RNG.integers(0, 256, (m, k)).astype(np.uint8)
    w = RNG.integers(-128, 128, (n, k) if transposed else (k, n)).astype(np.int8)
    a[0, :], w[..., 0] = 255, -128  # the largest products
    want = a.astype(np.int32) @ (w.T if transposed else w).astype(np.int32)
    return a, w, want


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("transposed, swapped", [(False, False), (True, False), (False, True)])
def test_dot_layout_keeps_the_sums_and_replays_from_json(transposed: bool, swapped: bool) -> None:
    T = int8_matmul(37, 48, 68, transposed=transposed, swapped=swapped)
    s = asc.create_schedule(T[-1].op)
    packed = s.dot_layout(T[-1], 4)
    assert packed.name == "W.packed" and packed.shape == (3, 17, 16, 4) and packed.dtype == "int8"
    assert [iv.name for iv in s[T[-1]].op.reduce_axis] == ["r.o", "r.i"]
    steps = [Step.from_json(st.to_json()) for st in s.steps]
    replayed = asc.Schedule.replay([T[-1]], steps)
    f = asc.build(replayed, T, "c")
    a, w, want = _operands(37, 48, 68, transposed)
    c = np.zeros((37, 48), np.int32)
    f(a, w, c)
    np.testing.assert_array_equal(c, want)


def test_dot_layout_refuses_what_it_cannot_lay_out_in_one_line() -> None:
    T = int8_matmul(8, 40, 64)
    with pytest.raises(ScheduleError, match="N=40 must divide by 16 and K=64 by 4"):
        asc.create_schedule(T[-1].op).dot_layout(T[-1], 4)
    X = asc.placeholder((8, 16), name="X")
    Y = asc.compute((8, 16), lambda i, j: X[i, j] * 2.0, name="Y")
    with pytest.raises(ScheduleError, match=r"Y is not sum\(A\[\.\.\., k\]"):
        asc.create_schedule(Y.op).dot_layout(Y, 4)
    T = int8_matmul(8, 32, 64)
    s = asc.create_schedule(T[-1].op)
    s[T[-1]].split(s[T[-1]].op.axis[0], 4)
    with pytest.raises(ScheduleError, match="must come before the stage's loops are changed"):
        s.dot_layout(T[-1], 4)


def int8_conv_nhwc(n: int, h: int, w: int, c: int, f: int, k: int, stride: int, pad: int,
                   layout: str = "NHWC") -> list[asc.Tensor]:  # fmt: skip
    """A convolution with a padding stage; ``layout="NCHW"`` puts the channels before the pixels
    (the reduction over channels is then not the input's last index: no intrinsic matches)."""
    nhwc = layout == "NHWC"
    X = asc.placeholder((n, h, w, c) if nhwc else (n, c, h, w), "uint8", name="X")
    W = asc.placeholder((k, k, c, f), "int8", name="W")
    hp, wp = h + 2 * pad, w + 2 * pad

    def padded(b: Var, u: Var, v: Var, ch: Var) -> Expr:
        inside = asc.all(u >= pad, u < h + pad, v >= pad, v < w + pad)
        value = X[b, u - pad, v - pad, ch] if nhwc else X[b, ch, u - pad, v - pad]
        return asc.if_then_else(inside, value, asc.const(0, "uint8"))

    P = asc.compute((n, hp, wp, c), padded, name="P") if nhwc else asc.compute(
        (n, c, hp, wp), lambda b, ch, u, v: padded(b, u, v, ch), name="P")  # fmt: skip
    ry, rx, rc = asc.reduce_axis(k, name="ry"), asc.reduce_axis(k, name="rx"), asc.reduce_axis(c, name="rc")
    oh, ow = (hp - k) // stride + 1, (wp - k) // stride + 1

    def body(b: Var, y: Var, x: Var, o: Var) -> Expr:
        u, v = y * stride + ry, x * stride + rx
        a = P[b, u, v, rc] if nhwc else P[b, rc, u, v]
        return asc.sum(a.astype("int32") * W[ry, rx, rc, o].astype("int32"), axis=[ry, rx, rc])

    return [X, W, asc.compute((n, oh, ow, f), body, name="C")]


def conv_reference(x: np.ndarray, w: np.ndarray, stride: int, pad: int) -> np.ndarray:
    xp = np.pad(x.astype(np.int64), ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    k = w.shape[0]
    oh, ow = (xp.shape[1] - k) // stride + 1, (xp.shape[2] - k) // stride + 1
    out = np.zeros((x.shape[0], oh, ow, w.shape[3]), np.int64)
    for ry in range(k):
        for rx in range(k):
            window = xp[:, ry : ry + stride * oh : stride, rx : rx + stride * ow : stride, :]
            out += np.einsum("nyxc,cf->nyxf", window, w[ry, rx].astype(np.int64))
    return out.astype(np.int32)


@asc.workload("test_user_int8_conv")
def user_int8_conv(n: int, h: int, w: int, c: int, f: int, k: int, stride: int, pad: int) -> list[asc.Tensor]:
    return int8_conv_nhwc(n, h, w, c, f, k, stride, pad)


@asc.workload("test_user_int8_conv_nchw")
def user_int8_conv_nchw(
    n: int, h: int, w: int, c: int, f: int, k: int, stride: int, pad: int
) -> list[asc.Tensor]:
    return int8_conv_nhwc(n, h, w, c, f, k, stride, pad, layout="NCHW")


@asc.workload("test_user_int8_bmm")
def user_int8_bmm(b: int, m: int, n: int, k: int) -> list[asc.Tensor]:
    A = asc.placeholder((b, m, k), "uint8", name="A")
    W = asc.placeholder((b, k, n), "int8", name="W")
    r = asc.reduce_axis(k, name="r")
    product = lambda z, i, j: asc.sum(A[z, i, r].astype("int32") * W[z, r, j].astype("int32"), axis=r)  # noqa: E731
    return [A, W, asc.compute((b, m, n), product, name="C")]


@pytest.mark.requires("gcc", "avx2")
@pytest.mark.parametrize(
    "args", [(1, 9, 11, 12, 32, 3, 1, 1), (2, 10, 9, 8, 16, 3, 2, 0), (1, 7, 7, 16, 16, 1, 1, 0)]
)
def test_programs_of_an_nhwc_convolution_s_tensorize_sketch_equal_numpy(args: tuple[int, ...]) -> None:
    """Padding stage at the root, taps outside the blocks, rows of output pixels (strided reads)."""
    wl = asc.Task("test_user_int8_conv", args).workload
    space = SketchSpace(wl, AVX2)
    index = _rules(space).index("tensorize")
    if args[-1]:
        assert space.sketches[index].plan("P").rule == "root"  # type: ignore[union-attr]
    n, h, w, c, f, k, stride, pad = args
    x = RNG.integers(0, 256, (n, h, w, c)).astype(np.uint8)
    wt = RNG.integers(-128, 128, (k, k, c, f)).astype(np.int8)
    want = conv_reference(x, wt, stride, pad)
    rng, done = random.Random(2), 0
    while done < 4:
        program = space.sample(rng)
        if program.sketch != index:
            continue
        out = np.zeros(want.shape, np.int32)
        asc.build(space.schedule(program), wl.tensors(), AVX2)(x, wt, out)
        np.testing.assert_array_equal(out, want)
        done += 1


@pytest.mark.requires("gcc", "avx2")
def test_programs_of_a_batched_matmul_s_tensorize_sketch_equal_numpy() -> None:
    wl = asc.Task("test_user_int8_bmm", (3, 19, 32, 36)).workload
    space = SketchSpace(wl, AVX2)
    index = _rules(space).index("tensorize")
    a = RNG.integers(0, 256, (3, 19, 36)).astype(np.uint8)
    w = RNG.integers(-128, 128, (3, 36, 32)).astype(np.int8)
    want = np.einsum("bik,bkj->bij", a.astype(np.int64), w.astype(np.int64)).astype(np.int32)
    rng, done = random.Random(4), 0
    while done < 3:
        program = space.sample(rng)
        if program.sketch != index:
            continue
        s = space.schedule(program)
        assert s["W.packed"].op.shape == (3, 2, 9, 16, 4)  # the batch kept, each batch's panels
        out = np.zeros((3, 19, 32), np.int32)
        asc.build(s, wl.tensors(), AVX2)(a, w, out)
        np.testing.assert_array_equal(out, want)
        done += 1


def _rules(space: SketchSpace) -> list[str]:
    """Per sketch, the rule of the product's stage C."""
    return [sk.plan("C").rule for sk in space.sketches]  # type: ignore[union-attr]


@asc.workload("test_user_int8_mm")
def user_int8_mm(m: int, n: int, k: int) -> list[asc.Tensor]:
    return int8_matmul(m, n, k)


@asc.workload("test_user_int8_mm_relu")
def user_int8_mm_relu(m: int, n: int, k: int) -> list[asc.Tensor]:
    """The product with an epilogue (a stage of its own under the tensorize rule)."""
    A, W, C = int8_matmul(m, n, k)
    return [A, W, asc.compute((m, n), lambda i, j: asc.max(C[i, j], 0), name="R")]


def test_the_rule_applies_where_the_target_has_an_intrinsic_and_the_shapes_allow_it() -> None:
    assert "tensorize" in _rules(SketchSpace(asc.Task("test_user_int8_mm", (64, 32, 64)).workload, AVX2))
    assert "tensorize" in _rules(SketchSpace(asc.Task("test_user_int8_mm", (64, 32, 64)).workload,
                                             "c -mattr=avx512_vnni"))  # fmt: skip
    for wl, target in [
        (asc.Task("test_user_int8_mm", (64, 32, 64)).workload, "c -mattr=none"),  # no intrinsic allowed
        (asc.Task("test_user_int8_mm", (64, 40, 64)).workload, AVX2),  # N does not divide by 16
        (asc.Task("matmul", (64, 32, 64)).workload, AVX2),  # float32
        (asc.Task("test_user_int8_mm", (64, 32, 64)).workload, "opencl"),
        (asc.Task("test_user_int8_conv_nchw", (1, 8, 8, 16, 16, 3, 1, 1)).workload, AVX2),  # C not last
    ]:
        assert "tensorize" not in _rules(SketchSpace(wl, target)), (wl, target)


@pytest.mark.requires("gcc", "avx2")
@pytest.mark.parametrize(
    "name, shape", [("test_user_int8_mm", (36, 48, 68)), ("test_user_int8_mm_relu", (21, 32, 132))]
)
def test_programs_of_the_tensorize_sketch_equal_numpy(name: str, shape: tuple[int, int, int]) -> None:
    wl = asc.Task(name, shape).workload
    space = SketchSpace(wl, AVX2)
    index = _rules(space).index("tensorize")
    rng = random.Random(5)
    m, n, k = shape
    a, w, want = _operands(m, n, k)
    if name.endswith("relu"):
        want = np.maximum(want, 0)
    drawn: set[tuple[int, int]] = set()
    for _ in range(200):
        if len(drawn) >= 4:
            break
        program = space.sample(rng)
        if program.sketch != index:
            continue
        tiles = program.annotation.tiles["C"]
        drawn.add((tiles["i"][0], tiles["r"][0]))
        s = space.schedule(program)
        assert any(st.kind == "tensorize" and st.intrin.startswith("dot_avx2_") for st in s.steps)
        c = np.zeros((m, n), np.int32)
        asc.build(s, wl.tensors(), AVX2)(a, w, c)
        np.testing.assert_array_equal(c, want)
    assert len(drawn) >= 4  # several row blocks and k blocks
    assert all(m % rows == 0 for rows, _ in drawn)  # no partial block left to the scalar loop nest


@pytest.mark.requires("gcc", "avx512_vnni")
def test_the_avx512_path_takes_panels_of_32_columns_where_n_allows() -> None:
    wl = asc.Task("test_user_int8_mm", (28, 64, 68)).workload
    target = "c -mattr=avx512_vnni,avx512bw,avx512f -num-threads=2"
    space = SketchSpace(wl, target)
    index = _rules(space).index("tensorize")
    rng = random.Random(3)
    a, w, want = _operands(28, 64, 68)
    built = 0
    for _ in range(100):
        program = space.sample(rng)
        if program.sketch != index or built == 3:
            continue
        s = space.schedule(program)
        assert any(st.kind == "dot_layout" and st.lanes == 32 for st in s.steps)
        assert any(st.kind == "tensorize" and st.intrin.endswith("_n32") for st in s.steps)
        c = np.zeros((28, 64), np.int32)
        asc.build(s, wl.tensors(), target)(a, w, c)
        np.testing.assert_array_equal(c, want)
        built += 1
    assert built == 3


def test_row_blocks_divide_the_rows_where_any_choice_does() -> None:
    assert mr_choices("vnni", "dot", 28) == (4, 7, 14, 28)  # a 28-pixel row of a convolution
    assert mr_choices("vnni", "dot", 1024) == (4, 8, 16)
    assert mr_choices("vnni", "dot", 31) == DOT_FALLBACK  # a prime over 28: partial blocks
    # blocks of 32 columns: two accumulators a row, at most 28
    assert mr_choices("vnni", "dot", 28, 32) == (4, 7, 14)
    assert mr_choices("vnni", "dot", 31, 32) == (4, 6, 8, 12)
    assert mr_choices("vnni", "avx2", 21) == (1, 3)
    assert mr_choices("sdot", "dot", 10) == (2,)  # NEON
    assert mr_choices("vnni", "amx", 20) == (16, 32, 48, 64)  # whole tiles, whatever the rows
    # a tile that mutation moved off the choices goes back to the largest below it
    assert legal_rows(9, (4, 7, 14, 28)) == 7
    assert legal_rows(2, (4, 7, 14, 28)) == 4


@pytest.mark.requires("gcc", "avx2")
def test_a_user_int8_matmul_tunes_to_the_intrinsic_and_replays_in_a_fresh_process(tmp_path: Path) -> None:
    """In real processes, as a script would: tune the operator (no schedule written for it); the
    search measures tensorized programs; in another process the fastest of them, alone in a log,
    replays (its intrinsic declared from its recorded name) and so does the run's best, both
    exact. Which program is fastest is the benchmark's business (bench_auto_tensorize.py)."""
    define = textwrap.dedent(f'''
        import sys
        import numpy as np, autosched as asc
        @asc.workload("user_int8_mm")
        def user_int8_mm(m, n, k):
            A = asc.placeholder((m, k), "uint8", name="A")
            W = asc.placeholder((k, n), "int8", name="W")
            r = asc.reduce_axis(k, name="r")
            C = asc.compute(
                (m, n), lambda i, j: asc.sum(A[i, r].astype("int32") * W[r, j].astype("int32"), axis=r)
            )
            return [A, W, C]
        task = asc.Task("user_int8_mm", (256, 256, 256), target="{AVX2}")
    ''')
    log = tmp_path / "log.jsonl"
    tune = define + f"asc.tune(task, trials=24, log={str(log)!r}, seed=3)\n"
    done = subprocess.run([sys.executable, "-c", tune], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    records = [r for r in asc.load_records(log) if r.ok]
    tensorized = [r for r in records if r.steps[0].kind == "dot_layout"]
    assert len(records) >= 20 and tensorized, [r.steps[0].kind for r in records]
    alone = tmp_path / "tensorized.jsonl"
    append_records(alone, [min(tensorized, key=lambda r: r.median)])
    use = define + textwrap.dedent('''
        a = np.random.default_rng(0).integers(0, 256, (256, 256)).astype(np.uint8)
        w = np.random.default_rng(1).integers(-128, 128, (256, 256)).astype(np.int8)
        for log in sys.argv[1:]:
            c = np.zeros((256, 256), np.int32)
            asc.load_best(log, task)(a, w, c)
            assert (c == a.astype(np.int32) @ w.astype(np.int32)).all(), log
        print("exact")
    ''')
    command = [sys.executable, "-c", use, str(alone), str(log)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "exact", done.stderr[-2000:]
    assert "passed over" not in done.stderr  # the records replayed: the intrinsic declared by name


@asc.workload("test_user_dot_mm")
def user_dot_mm(m: int, n: int, k: int, dtype: str) -> list[asc.Tensor]:
    """s8 x s8 or u8 x u8 -> s32: AArch64's sdot / udot kinds."""
    return int8_matmul(m, n, k, a_dtype=dtype, b_dtype=dtype)


@pytest.mark.requires("aarch64-linux-gnu-gcc", "aarch64-linux-gnu-objdump", "qemu-aarch64")
@pytest.mark.parametrize("dtype, kind", [("int8", "sdot"), ("uint8", "udot")])
def test_the_tensorize_sketch_takes_neon_dot_products_on_an_aarch64_target(
    dtype: str, kind: str, tmp_path: Path
) -> None:
    """The same rule on another architecture: a cross target whose -mattr allows dotprod gets sdot
    or udot, built by the board builder and run bit-exact under qemu-aarch64 -cpu max."""
    target = "c -cc=aarch64-linux-gnu-gcc -num-threads=1 -mattr=asimddp"
    task = asc.Task("test_user_dot_mm", (13, 32, 68, dtype), target=target)
    space = SketchSpace(task.workload, target)
    index = _rules(space).index("tensorize")
    rng = random.Random(1)
    program = next(p for p in iter(lambda: space.sample(rng), None) if p.sketch == index)
    steps = space.steps(program)
    assert any(st.kind == "tensorize" and st.intrin.startswith(f"dot_{kind}_") for st in steps)
    (built,) = RemoteBuilder(cache_dir=tmp_path / "cache").build([MeasureInput(task, steps)])
    assert built.error_no == MeasureErrorNo.NO_ERROR and built.lib_path, built.error_msg
    exe = tmp_path / "candidate"
    exe.write_bytes(gzip.decompress(Path(built.lib_path).read_bytes()))
    exe.chmod(0o755)
    lo, np_type = (-128, np.int8) if kind == "sdot" else (0, np.uint8)
    a = RNG.integers(lo, lo + 256, (13, 68)).astype(np_type)
    w = RNG.integers(lo, lo + 256, (68, 32)).astype(np_type)
    a[0, :], w[:, 0] = (-128, -128) if kind == "sdot" else (255, 255)  # the largest products
    a.tofile(tmp_path / "in0.bin")
    w.tofile(tmp_path / "in1.bin")
    run = subprocess.run(["qemu-aarch64", "-cpu", "max", str(exe), str(tmp_path), "1", "1", "0", "0", "0"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr
    c = np.fromfile(tmp_path / "out0.bin", np.int32).reshape(13, 32)
    np.testing.assert_array_equal(c, a.astype(np.int32) @ w.astype(np.int32))
    dis = subprocess.run(["aarch64-linux-gnu-objdump", "-d", str(exe)], capture_output=True, text=True)
    assert kind in {w for line in dis.stdout.splitlines() for w in line.split("\t")[2:3]}
