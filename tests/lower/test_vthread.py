"""Virtual-thread injection (lower.vthread): the injected copies in the lowered kernel, the strides
of a thread's outputs and shared-memory reads, the bank spread of a warp's reads, replay from the
steps' JSON, and the schedules it refuses (no device needed here)."""

from __future__ import annotations

import json

import pytest

import autosched as asc
from autosched.backends.gpu_schedules import elementwise_gpu, matmul_gpu
from autosched.expr import BinOp, Const, Expr, Var, substitute, walk
from autosched.lower import lower
from autosched.lower.gpu import GpuKernel, split_kernels
from autosched.lower.ir import Allocate, Buffer, BufLoad, For, Seq, Stmt, Store, stmt_children
from autosched.lower.simplify import simplify
from autosched.schedule import ScheduleError, create_schedule, thread_axis


def _matmul(m: int, n: int, k: int) -> list[asc.Tensor]:
    A = asc.placeholder((m, k), name="A")
    B = asc.placeholder((k, n), name="B")
    r = asc.reduce_axis(k, name="k")
    return [A, B, asc.compute((m, n), lambda i, j: asc.sum(A[i, r] * B[r, j], axis=r), name="C")]


def _kernel(s: asc.Schedule, args: list[asc.Tensor]) -> GpuKernel:
    (kernel,) = split_kernels(lower(s, args, gpu=True), 1024, 48 << 10).kernels
    return kernel


def _stmts(s: Stmt) -> list[Stmt]:
    return [s, *(y for x in stmt_children(s) for y in _stmts(x))]


def _compute(kernel: GpuKernel) -> list[Store]:
    """The stores of the innermost accumulation loop (its body: stores to C.local reading B.shared)."""
    found = []
    for lp in (x for x in _stmts(kernel.body) if isinstance(x, For)):
        body = lp.body.stmts if isinstance(lp.body, Seq) else (lp.body,)
        stores = [x for x in body if isinstance(x, Store) and x.buffer.name == "C.local"]
        if len(stores) == len(body) and all(_loads(x.value, "B.shared") for x in stores):
            found.append(stores)
    (inner,) = found
    return inner


def _locals(kernel: GpuKernel) -> list[Buffer]:
    return [x.buffer for x in _stmts(kernel.body) if isinstance(x, Allocate) and x.buffer.scope == "local"]


def _loads(e: Expr, name: str) -> list[Expr]:
    return [x.index for x in walk(e) if isinstance(x, BufLoad) and x.buffer.name == name]


def _offset(a: Expr, b: Expr) -> int:
    """``b - a`` where it is a constant (the copies of one statement differ by constants)."""
    d = simplify(BinOp("sub", b, a, "int32"))
    assert isinstance(d, Const), f"{b} - {a} is not constant"
    return int(d.value)


def test_an_8x8_register_tile_in_2x2_virtual_threads_is_injected_with_block_strided_copies() -> None:
    args = _matmul(128, 128, 64)
    kernel = _kernel(matmul_gpu(args, "cuda", block=8, reg=8, k_tile=8, vthreads=2), args)
    assert (kernel.grid, kernel.block) == ((2, 2, 1), (8, 8, 1))
    assert not any(isinstance(x, For) and x.thread == "vthread" for x in _stmts(kernel.body))
    # shared tiles serve the whole block (64 rows/columns), fetched once, not once per virtual thread
    assert {b.name: b.size for b in kernel.shared} == {"A.shared": 64 * 8, "B.shared": 8 * 64}
    fetches = [x for x in _stmts(kernel.body) if isinstance(x, Store) and x.buffer.scope == "shared"]
    assert sorted(x.buffer.name for x in fetches) == ["A.shared", "B.shared"]
    (local,) = _locals(kernel)
    assert local.shape == (2, 2, 4, 4)
    # the innermost loop holds the four virtual threads' statements side by side: each its own
    # quarter of the registers, rows 32 apart in A.shared (32 rows x 8) and columns 32 apart in B.shared
    stores = _compute(kernel)
    assert len(stores) == 4
    first = stores[0]
    assert sorted(_offset(first.index, x.index) for x in stores) == [0, 16, 32, 48]
    a_offsets = {_offset(_loads(first.value, "A.shared")[0], _loads(x.value, "A.shared")[0]) for x in stores}
    b_offsets = {_offset(_loads(first.value, "B.shared")[0], _loads(x.value, "B.shared")[0]) for x in stores}
    assert a_offsets == {0, 32 * 8} and b_offsets == {0, 32}
    # the output stores: each virtual thread's outputs 32 rows / 32 columns apart in C (128 wide)
    outs = [x for x in _stmts(kernel.body) if isinstance(x, Store) and x.buffer.name == "C"]
    assert sorted(_offset(outs[0].index, x.index) for x in outs) == [0, 32, 32 * 128, 32 * 128 + 32]


def test_a_4x8_tile_splits_its_columns_over_two_virtual_threads() -> None:
    args = _matmul(64, 128, 32)
    kernel = _kernel(matmul_gpu(args, "cuda", block=8, reg=(4, 8), k_tile=8, vthreads=(1, 2)), args)
    (local,) = _locals(kernel)
    assert local.shape == (2, 4, 4)
    stores = _compute(kernel)
    assert len(stores) == 2
    a, b = (_loads(x.value, "A.shared")[0] for x in stores), (_loads(x.value, "B.shared")[0] for x in stores)
    assert _offset(*a) == 0 and _offset(*b) == 32  # same rows, columns half the block's 64 apart


def _lane_banks(kernel: GpuKernel, index: Expr, lanes: int = 32) -> int:
    """The most distinct addresses that the first warp's lanes read on one bank of shared memory
    (32 banks of 4 bytes) at ``index``, every other loop at 0: 1 is conflict-free."""
    used = {v for v in walk(index) if isinstance(v, Var)}
    loops = [x for x in _stmts(kernel.body) if isinstance(x, For) and x.var in used]
    threads = {x.thread: x.var for x in loops if x.thread}
    others = used - set(threads.values())
    per_bank: dict[int, set[int]] = {}
    for lane in range(lanes):
        env: dict[Var, Expr] = {v: Const(0, "int32") for v in others}
        for tag, value in (("threadIdx.x", lane % kernel.block[0]), ("threadIdx.y", lane // kernel.block[0])):
            if tag in threads:
                env[threads[tag]] = Const(value, "int32")
        address = simplify(substitute(index, env))
        assert isinstance(address, Const)
        per_bank.setdefault(int(address.value) % 32, set()).add(int(address.value))
    return max(len(a) for a in per_bank.values())


def test_virtual_threads_spread_a_warps_b_tile_reads_over_distinct_banks() -> None:
    """With 8 contiguous columns per thread the 8 threads of a warp row read B.shared 8 floats
    apart: two of them on each of 4 banks. Split over 2 virtual threads, the columns of one
    statement are 4 apart: one address per bank."""
    args = _matmul(128, 128, 64)
    serial = _kernel(matmul_gpu(args, "cuda", block=8, reg=8, k_tile=8), args)
    injected = _kernel(matmul_gpu(args, "cuda", block=8, reg=8, k_tile=8, vthreads=2), args)
    conflicts = [_lane_banks(k, _loads(_compute(k)[0].value, "B.shared")[0]) for k in (serial, injected)]
    assert conflicts == [2, 1]
    # A.shared (rows of k_tile floats) is read by a warp's 4 thread rows on one bank either way: a
    # layout question (padding, a transposed tile), not one of virtual threads
    rows = [_lane_banks(k, _loads(_compute(k)[0].value, "A.shared")[0]) for k in (serial, injected)]
    assert rows == [4, 4]


def test_a_vthread_schedule_replays_from_its_steps_json() -> None:
    args = _matmul(50, 70, 30)  # no tile divides: guarded copies
    s = matmul_gpu(args, "opencl", block=4, reg=4, k_tile=4, vthreads=2)
    steps = asc.steps_from_json(json.loads(json.dumps(asc.steps_to_json(s.steps))))
    again = asc.Schedule.replay([args[-1]], steps)
    assert sum(1 for st in steps if getattr(st, "thread", None) == "vthread") == 2
    assert str(asc.lower(again, args)) == str(asc.lower(s, args))
    assert "vthread" not in str(asc.lower(again, args))


def test_more_virtual_threads_than_registers_hold_is_one_schedule_error() -> None:
    args = _matmul(64, 64, 64)
    s = matmul_gpu(args, "cuda", block=4, reg=(4, 8), k_tile=8, vthreads=(4, 8))
    with pytest.raises(ScheduleError, match=r"makes 32 virtual threads in one nest, over the limit of 16"):
        asc.lower(s, args)


def test_vthreads_that_do_not_divide_the_register_tile_are_a_schedule_error() -> None:
    with pytest.raises(ScheduleError, match=r"vthreads=3 does not divide the register tile reg=4"):
        matmul_gpu(_matmul(64, 64, 64), "cuda", block=4, reg=4, k_tile=8, vthreads=3)


def test_a_vthread_loop_inside_a_thread_loop_is_a_schedule_error() -> None:
    X = asc.placeholder((256,), name="X")
    Y = asc.compute((256,), lambda i: X[i] * 2.0, name="Y")
    s = create_schedule(Y)
    bx, rest = s[Y].split(Y.op.axis[0], factor=32)
    tx, vt = s[Y].split(rest, factor=2)
    s[Y].bind(bx, thread_axis("blockIdx.x"))
    s[Y].bind(tx, thread_axis("threadIdx.x"))
    s[Y].bind(vt, thread_axis("vthread"))
    with pytest.raises(ScheduleError, match=r"vthread loop Y.i.inner.inner is inside loop Y.i.inner.outer "
                                            r"\(threadIdx.x\): virtual threads divide"):
        asc.lower(s, [X, Y])


def test_schedules_without_virtual_threads_lower_as_before() -> None:
    """No vthread loop: the pass returns the kernel body untouched (one elementwise kernel)."""
    X = asc.placeholder((100,), name="X")
    Y = asc.compute((100,), lambda i: X[i] + 1.0, name="Y")
    func = lower(elementwise_gpu([X, Y], threads=32), [X, Y], gpu=True)
    (kernel,) = split_kernels(func, 1024, 48 << 10).kernels
    assert str(kernel.body) == str(func.body)
