"""Ports of TVM's te tutorials, part 1: schedule primitives, reduction, tuple inputs, intrinsic
math and scan (`bench_te_tutorials.py` runs them).

Each port keeps the tutorial's statements in order with the mechanical renaming that
`bench_te_tutorials.py` describes (``te.`` / ``tvm.te.`` / ``tvm.tir.`` / ``tvm.`` -> ``asc.``,
target ``"llvm"`` -> ``"c"``); the tutorials' prose is left out. A statement whose first line
ends in ``# runtime`` uses TVM's runtime (device arrays, ``tvm.testing``, timers, modules) and is
written with numpy and the built kernel instead; ``# gpu`` marks statements that need a GPU.
Neither kind is counted in the share of te statements that run unchanged.
"""

from __future__ import annotations

#: the schedule-primitives tutorial's two-stage pipeline, declared afresh four times there
_ABC = """
A = asc.placeholder((m,), name="A")
B = asc.compute((m,), lambda i: A[i] + 1, name="B")
C = asc.compute((m,), lambda i: B[i] * 2, name="C")
s = asc.create_schedule(C.op)
"""

SCHEDULE_PRIMITIVES = """
n = asc.var("n")
m = asc.var("m")
A = asc.placeholder((m, n), name="A")
B = asc.placeholder((m, n), name="B")
C = asc.compute((m, n), lambda i, j: A[i, j] * B[i, j], name="C")
s = asc.create_schedule([C.op])
print(asc.lower(s, [A, B, C], simple_mode=True))
A = asc.placeholder((m,), name="A")
B = asc.compute((m,), lambda i: A[i] * 2, name="B")
s = asc.create_schedule(B.op)
xo, xi = s[B].split(B.op.axis[0], factor=32)
print(asc.lower(s, [A, B], simple_mode=True))
A = asc.placeholder((m,), name="A")
B = asc.compute((m,), lambda i: A[i], name="B")
s = asc.create_schedule(B.op)
bx, tx = s[B].split(B.op.axis[0], nparts=32)
print(asc.lower(s, [A, B], simple_mode=True))
A = asc.placeholder((m, n), name="A")
B = asc.compute((m, n), lambda i, j: A[i, j], name="B")
s = asc.create_schedule(B.op)
xo, yo, xi, yi = s[B].tile(B.op.axis[0], B.op.axis[1], x_factor=10, y_factor=5)
print(asc.lower(s, [A, B], simple_mode=True))
A = asc.placeholder((m, n), name="A")
B = asc.compute((m, n), lambda i, j: A[i, j], name="B")
s = asc.create_schedule(B.op)
xo, yo, xi, yi = s[B].tile(B.op.axis[0], B.op.axis[1], x_factor=10, y_factor=5)
fused = s[B].fuse(xi, yi)
print(asc.lower(s, [A, B], simple_mode=True))
A = asc.placeholder((m, n), name="A")
B = asc.compute((m, n), lambda i, j: A[i, j], name="B")
s = asc.create_schedule(B.op)
xo, yo, xi, yi = s[B].tile(B.op.axis[0], B.op.axis[1], x_factor=10, y_factor=5)
s[B].reorder(xi, yo, xo, yi)
print(asc.lower(s, [A, B], simple_mode=True))
A = asc.placeholder((n,), name="A")
B = asc.compute(A.shape, lambda i: A[i] * 2, name="B")
s = asc.create_schedule(B.op)
bx, tx = s[B].split(B.op.axis[0], factor=64)
s[B].bind(bx, asc.thread_axis("blockIdx.x"))
s[B].bind(tx, asc.thread_axis("threadIdx.x"))
print(asc.lower(s, [A, B], simple_mode=True))
ABC
print(asc.lower(s, [A, B, C], simple_mode=True))
ABC
s[B].compute_at(s[C], C.op.axis[0])
print(asc.lower(s, [A, B, C], simple_mode=True))
ABC
s[B].compute_inline()
print(asc.lower(s, [A, B, C], simple_mode=True))
ABC
s[B].compute_at(s[C], C.op.axis[0])
s[B].compute_root()
print(asc.lower(s, [A, B, C], simple_mode=True))
""".replace("ABC\n", _ABC.lstrip("\n"))

REDUCTION = """
n = asc.var("n")
m = asc.var("m")
A = asc.placeholder((n, m), name="A")
k = asc.reduce_axis((0, m), "k")
B = asc.compute((n,), lambda i: asc.sum(A[i, k], axis=k), name="B")
s = asc.create_schedule(B.op)
print(asc.lower(s, [A, B], simple_mode=True))
ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
xo, xi = s[B].split(B.op.axis[0], factor=32)
print(asc.lower(s, [A, B], simple_mode=True))
s[B].bind(xo, asc.thread_axis("blockIdx.x"))
s[B].bind(xi, asc.thread_axis("threadIdx.x"))
print(asc.lower(s, [A, B], simple_mode=True))
s = asc.create_schedule(B.op)
ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
BF = s.rfactor(B, ki)
print(asc.lower(s, [A, B], simple_mode=True))
print(s[B].op.body)
xo, xi = s[B].split(s[B].op.axis[0], factor=32)
s[B].bind(xo, asc.thread_axis("blockIdx.x"))
s[B].bind(xi, asc.thread_axis("threadIdx.y"))
tx = asc.thread_axis("threadIdx.x")
s[B].bind(s[B].op.reduce_axis[0], tx)
s[BF].compute_at(s[B], s[B].op.reduce_axis[0])
s[B].set_store_predicate(tx.var.equal(0))
fcuda = asc.build(s, [A, B], "cuda")
print(asc.emit(s, [A, B], "cuda"))  # runtime
nn = 128
dev = asc.cuda(0)  # gpu
a = np.random.uniform(size=(nn, nn)).astype(A.dtype)
b = np.zeros(nn, dtype=B.dtype)  # runtime
fcuda(a, b)  # gpu
np.testing.assert_allclose(b, np.sum(a, axis=1), rtol=1e-4)  # gpu
n = asc.var("n")
Input = asc.placeholder((n, n), name="Input")
Filter = asc.placeholder((3, 3), name="Filter")
di = asc.reduce_axis((0, 3), name="di")
dj = asc.reduce_axis((0, 3), name="dj")
Output = asc.compute(
    (n - 2, n - 2),
    lambda i, j: asc.sum(Input[i + di, j + dj] * Filter[di, dj], axis=[di, dj]),
    name="Output",
)
s = asc.create_schedule(Output.op)
print(asc.lower(s, [Input, Filter, Output], simple_mode=True))
n = asc.var("n")
m = asc.var("m")
product = asc.comm_reducer(lambda x, y: x * y, lambda t: asc.const(1, dtype=t), name="product")
A = asc.placeholder((n, m), name="A")
k = asc.reduce_axis((0, m), name="k")
B = asc.compute((n,), lambda i: product(A[i, k], axis=k), name="B")
"""

TUPLE_INPUTS = """
n = asc.var("n")
m = asc.var("m")
A0 = asc.placeholder((m, n), name="A0")
A1 = asc.placeholder((m, n), name="A1")
B0, B1 = asc.compute((m, n), lambda i, j: (A0[i, j] + 2, A1[i, j] * 3), name="B")
s = asc.create_schedule(B0.op)
print(asc.lower(s, [A0, A1, B0, B1], simple_mode=True))
def fcombine(x, y):
    lhs = asc.Select((x[1] >= y[1]), x[0], y[0])
    rhs = asc.Select((x[1] >= y[1]), x[1], y[1])
    return lhs, rhs
def fidentity(t0, t1):
    return asc.const(-1, t0), asc.min_value(t1)
argmax = asc.comm_reducer(fcombine, fidentity, name="argmax")
m = asc.var("m")
n = asc.var("n")
idx = asc.placeholder((m, n), name="idx", dtype="int32")
val = asc.placeholder((m, n), name="val", dtype="int32")
k = asc.reduce_axis((0, n), "k")
T0, T1 = asc.compute((m,), lambda i: argmax((idx[i, k], val[i, k]), axis=k), name="T")
s = asc.create_schedule(T0.op)
print(asc.lower(s, [idx, val, T0, T1], simple_mode=True))
n = asc.var("n")
m = asc.var("m")
A0 = asc.placeholder((m, n), name="A0")
B0, B1 = asc.compute((m, n), lambda i, j: (A0[i, j] + 2, A0[i, j] * 3), name="B")
A1 = asc.placeholder((m, n), name="A1")
C = asc.compute((m, n), lambda i, j: A1[i, j] + B0[i, j], name="C")
s = asc.create_schedule(C.op)
s[B0].compute_at(s[C], C.op.axis[0])
print(asc.lower(s, [A0, A1, C], simple_mode=True))
"""

#: the intrinsic-math tutorial's GPU schedule of ``B`` (written three times there)
_BIND64 = """
s = asc.create_schedule(B.op)
num_thread = 64
bx, tx = s[B].split(B.op.axis[0], factor=num_thread)
s[B].bind(bx, asc.thread_axis("blockIdx.x"))
s[B].bind(tx, asc.thread_axis("threadIdx.x"))
"""

INTRIN_MATH = """
n = asc.var("n")
A = asc.placeholder((n,), name="A")
B = asc.compute(A.shape, lambda i: asc.call_pure_extern("float32", "__expf", A[i]), name="B")
BIND64
f = asc.build(s, [A, B], "cuda", name="myexp")
print(asc.emit(s, [A, B], "cuda", name="myexp"))  # runtime
n = asc.var("n")
A = asc.placeholder((n,), name="A")
B = asc.compute(A.shape, lambda i: asc.exp(A[i]), name="B")
BIND64
fcuda = asc.build(s, [A, B], "cuda", name="myexp")
print(asc.emit(s, [A, B], "cuda", name="myexp"))  # runtime
fopencl = asc.build(s, [A, B], "opencl", name="myexp")
print(asc.emit(s, [A, B], "opencl", name="myexp"))  # runtime
def my_cuda_math_rule(op):
    assert isinstance(op, asc.Call)
    name = op.op.name
    assert name.startswith("tir.")
    dispatch_name = name[4:]
    if op.dtype == "float32":
        return asc.call_pure_extern("float32", "%sf" % dispatch_name, op.args[0])
    elif op.dtype == "float64":
        return asc.call_pure_extern("float32", dispatch_name, op.args[0])
    else:
        return op
asc.register_intrin_lowering("tir.exp", target="cuda", f=my_cuda_math_rule, level=99)
fcuda = asc.build(s, [A, B], "cuda", name="myexp")
print(asc.emit(s, [A, B], "cuda", name="myexp"))  # runtime
def mylog(x):
    return asc.call_intrin(x.dtype, "tir.mylog", x)
def my_cuda_mylog_rule(op):
    if op.dtype == "float32":
        return asc.call_pure_extern("float32", "logf", op.args[0])
    elif op.dtype == "float64":
        return asc.call_pure_extern("float64", "log", op.args[0])
    else:
        return op
asc.register_op_attr("tir.mylog", "TCallEffectKind", asc.CallEffectKind.Pure)
asc.register_intrin_lowering("tir.mylog", target="cuda", f=my_cuda_mylog_rule, level=99)
n = asc.var("n")
A = asc.placeholder((n,), name="A")
B = asc.compute(A.shape, lambda i: mylog(A[i]), name="B")
BIND64
fcuda = asc.build(s, [A, B], "cuda", name="mylog")
print(asc.emit(s, [A, B], "cuda", name="mylog"))  # runtime
""".replace("BIND64\n", _BIND64.lstrip("\n"))

SCAN = """
m = asc.var("m")
n = asc.var("n")
X = asc.placeholder((m, n), name="X")
s_state = asc.placeholder((m, n))
s_init = asc.compute((1, n), lambda _, i: X[0, i])
s_update = asc.compute((m, n), lambda t, i: s_state[t - 1, i] + X[t, i])
s_scan = asc.scan(s_init, s_update, s_state, inputs=[X])
s = asc.create_schedule(s_scan.op)
num_thread = 256
block_x = asc.thread_axis("blockIdx.x")
thread_x = asc.thread_axis("threadIdx.x")
xo, xi = s[s_init].split(s_init.op.axis[1], factor=num_thread)
s[s_init].bind(xo, block_x)
s[s_init].bind(xi, thread_x)
xo, xi = s[s_update].split(s_update.op.axis[1], factor=num_thread)
s[s_update].bind(xo, block_x)
s[s_update].bind(xi, thread_x)
print(asc.lower(s, [X, s_scan], simple_mode=True))
fscan = asc.build(s, [X, s_scan], "cuda", name="myscan")
dev = asc.cuda(0)  # gpu
n = 1024
m = 10
a_np = np.random.uniform(size=(m, n)).astype(s_scan.dtype)
b = np.zeros((m, n), dtype=s_scan.dtype)  # runtime
fscan(a_np, b)  # gpu
np.testing.assert_allclose(b, np.cumsum(a_np, axis=0))  # gpu
m = asc.var("m")
n = asc.var("n")
X = asc.placeholder((m, n), name="X")
s_state = asc.placeholder((m, n))
s_init = asc.compute((1, n), lambda _, i: X[0, i])
s_update_s1 = asc.compute((m, n), lambda t, i: s_state[t - 1, i] * 2, name="s1")
s_update_s2 = asc.compute((m, n), lambda t, i: s_update_s1[t, i] + X[t, i], name="s2")
s_scan = asc.scan(s_init, s_update_s2, s_state, inputs=[X])
s = asc.create_schedule(s_scan.op)
xo, xi = s[s_update_s2].split(s_update_s2.op.axis[1], factor=32)
s[s_update_s1].compute_at(s[s_update_s2], xo)
print(asc.lower(s, [X, s_scan], simple_mode=True))
m = asc.var("m")
n = asc.var("n")
l = asc.var("l")
X = asc.placeholder((m, n), name="X")
s_state1 = asc.placeholder((m, n))
s_state2 = asc.placeholder((m, l))
s_init1 = asc.compute((1, n), lambda _, i: X[0, i])
s_init2 = asc.compute((1, l), lambda _, i: 0.0)
s_update1 = asc.compute((m, n), lambda t, i: s_state1[t - 1, i] + X[t, i])
s_update2 = asc.compute((m, l), lambda t, i: s_state2[t - 1, i] + s_state1[t - 1, 0])
s_scan1, s_scan2 = asc.scan(
    [s_init1, s_init2], [s_update1, s_update2], [s_state1, s_state2], inputs=[X]
)
s = asc.create_schedule(s_scan1.op)
print(asc.lower(s, [X, s_scan1, s_scan2], simple_mode=True))
"""
