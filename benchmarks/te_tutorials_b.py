"""Ports of TVM's te tutorials, part 2: extern ops, tensorize, GEMM optimization on the CPU and
the getting-started guide (conventions: `te_tutorials_a.py`)."""

from __future__ import annotations

EXTERN_OP = """
n = 1024
l = 128
m = 235
bias = asc.var("bias", dtype="float32")
A = asc.placeholder((n, l), name="A")
B = asc.placeholder((l, m), name="B")
C = asc.extern(
    (n, m),
    [A, B],
    lambda ins, outs: asc.call_packed(
        "tvm.contrib.cblas.matmul", ins[0], ins[1], outs[0], False, False
    ),
    name="C",
)
D = asc.compute(C.shape, lambda i, j: C[i, j] + bias, name="D")
s = asc.create_schedule(D.op)
f = asc.build(s, [A, B, D, bias], "c")
a = np.random.uniform(size=(n, l)).astype(A.dtype)
b = np.random.uniform(size=(l, m)).astype(B.dtype)
d = np.zeros((n, m), dtype=D.dtype)
bb = 10.0
f(a, b, d, bb)
np.testing.assert_allclose(d, np.dot(a, b) + 10, rtol=1e-5)  # runtime
from autosched.contrib import cblas
C = cblas.matmul(A, B)
D = asc.compute(C.shape, lambda i, j: C[i, j] + bias, name="D")
s = asc.create_schedule(D.op)
@asc.register_func("tvm.contrib.my_tvm_addone")
def my_tvm_addone(x, y):
    print("my_tvm_addone signatures: %s, %s" % (type(x), type(y)))
    y[:] = x + 1  # runtime
A = asc.placeholder((n,), name="A")
B = asc.extern(
    A.shape,
    [A],
    lambda ins, outs: asc.call_packed("tvm.contrib.my_tvm_addone", ins[0], outs[0]),
    name="C",
)
s = asc.create_schedule(B.op)
f = asc.build(s, [A, B], "c")
a = np.random.uniform(size=(n,)).astype(A.dtype)
b = np.random.uniform(size=(n,)).astype(B.dtype)
f(a, b)
np.testing.assert_allclose(b, a + 1, rtol=1e-5)  # runtime
"""

#: the head of the tensorize tutorial's ``intrin_gemv`` (both versions): the GEMV compute and its
#: buffers
_GEMV_DECL = """
def intrin_gemv(m, l):
    a = asc.placeholder((l,), name="a")
    b = asc.placeholder((m, l), name="b")
    k = asc.reduce_axis((0, l), name="k")
    c = asc.compute((m,), lambda i: asc.sum(a[k] * b[i, k], axis=k), name="c")
    Ab = asc.decl_buffer(a.shape, a.dtype, name="A", offset_factor=1, strides=[1])
    Bb = asc.decl_buffer(b.shape, b.dtype, name="B", offset_factor=1, strides=[asc.var("s1"), 1])
    Cb = asc.decl_buffer(c.shape, c.dtype, name="C", offset_factor=1, strides=[1])
"""

TENSORIZE = """
N, M, L = 1024, 512, 64
A = asc.placeholder((N, L), name="A")
B = asc.placeholder((M, L), name="B")
k = asc.reduce_axis((0, L), name="k")
C = asc.compute((N, M), lambda i, j: asc.sum(A[i, k] * B[j, k], axis=k), name="C")
s = asc.create_schedule(C.op)
print(asc.lower(s, [A, B, C], simple_mode=True))
factor = 16
x, y = C.op.axis
(z,) = C.op.reduce_axis
yo, yi = s[C].split(y, factor=factor)
s[C].reorder(x, yo, yi, z)
print(asc.lower(s, [A, B, C], simple_mode=True))
GEMV_DECL
    def intrin_func(ins, outs):
        ib = asc.ir_builder.create()
        aa, bb = ins
        cc = outs[0]
        ib.emit(
            asc.call_extern("int32", "gemv_update", cc.access_ptr("w"), aa.access_ptr("r"),
                            bb.access_ptr("r"), m, l, bb.strides[0])
        )
        return ib.get()
    return asc.decl_tensor_intrin(c.op, intrin_func, binds={a: Ab, b: Bb, c: Cb})
gemv = intrin_gemv(factor, L)
s[C].tensorize(yi, gemv)
print(asc.lower(s, [A, B, C], simple_mode=True))
def gemv_impl():  # runtime
    return GEMV_C_UPDATE
s[C].pragma(x, "import_llvm", gemv_impl())
print(asc.lower(s, [A, B, C], simple_mode=True))
func = asc.build(s, [A, B, C], target="c", name="gemv")
dtype = A.dtype
a = np.random.uniform(size=get_const_tuple(A.shape)).astype(dtype)
b = np.random.uniform(size=get_const_tuple(B.shape)).astype(dtype)
c = np.zeros(get_const_tuple(C.shape), dtype=dtype)
func(a, b, c)  # runtime
np.testing.assert_allclose(c, np.dot(a, b.T), rtol=1e-3)  # runtime
zo, zi = s[C].split(z, factor=factor)
s[C].reorder(x, yo, zo, yi, zi)
def gemv_impl():  # runtime
    return GEMV_C_UPDATE + GEMV_C_RESET
GEMV_DECL
    def intrin_func(ins, outs):
        aa, bb = ins
        cc = outs[0]
        def _body():
            ib = asc.ir_builder.create()
            ib.emit(
                asc.call_extern("int32", "gemv_update", cc.access_ptr("w"), aa.access_ptr("r"),
                            bb.access_ptr("r"), m, l, bb.strides[0])
            )
            return ib.get()
        def _reduce_reset():
            ib = asc.ir_builder.create()
            ib.emit(asc.call_extern("int32", "gemv_reset", cc.access_ptr("w"), m))
            return ib.get()
        def _reduce_update():
            return _body()
        return _body(), _reduce_reset(), _reduce_update()
    return asc.decl_tensor_intrin(c.op, intrin_func, binds={a: Ab, b: Bb, c: Cb})
gemv = intrin_gemv(factor, factor)
s[C].tensorize(yi, gemv)
s[C].pragma(yo, "import_llvm", gemv_impl())
func = asc.build(s, [A, B, C], target="c", name="gemv")
a = np.random.uniform(size=get_const_tuple(A.shape)).astype(dtype)
b = np.random.uniform(size=get_const_tuple(B.shape)).astype(dtype)
c = np.zeros(get_const_tuple(C.shape), dtype=dtype)
func(a, b, c)  # runtime
np.testing.assert_allclose(c, np.dot(a, b.T), rtol=1e-3)  # runtime
""".replace("GEMV_DECL\n", _GEMV_DECL.lstrip("\n"))

#: the body of TVM's ``opt_gemm`` after its ``A``/``B``/``C`` definition: blocking, vectorization,
#: loop permutation, array packing, write cache, parallel (each step built, run and checked)
_GEMM_STEPS = """
bn = 32
kfactor = 4
TILE
s[C].reorder(mo, no, ko, ki, mi, ni)
CHECK
TILE
s[C].reorder(mo, no, ko, ki, mi, ni)
s[C].vectorize(ni)
CHECK
TILE
s[C].reorder(mo, no, ko, mi, ki, ni)
s[C].vectorize(ni)
CHECK
packedB = asc.compute(
    (N / bn, K, bn), lambda bigN, k, littleN: B[k, bigN * bn + littleN], name="packedB"
)
C = asc.compute(
    (M, N),
    lambda m, n: asc.sum(A[m, k] * packedB[n // bn, k, asc.indexmod(n, bn)], axis=k),
    name="C",
)
TILE
s[C].reorder(mo, no, ko, mi, ki, ni)
s[C].vectorize(ni)
bigN, _, littleN = s[packedB].op.axis
s[packedB].vectorize(littleN)
s[packedB].parallel(bigN)
CHECK
CACHE
bigN, _, littleN = s[packedB].op.axis
s[packedB].vectorize(littleN)
s[packedB].parallel(bigN)
CHECK
CACHE
s[C].parallel(mo)
bigN, _, littleN = s[packedB].op.axis
s[packedB].vectorize(littleN)
s[packedB].parallel(bigN)
CHECK
"""

#: statements the GEMM tutorial repeats: a fresh schedule tiled and its reduction split; the
#: write cache computed at the column block
_GEMM_TILE = """
s = asc.create_schedule(C.op)
mo, no, mi, ni = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
(kaxis,) = s[C].op.reduce_axis
ko, ki = s[C].split(kaxis, factor=kfactor)
"""
_GEMM_CACHE = """
s = asc.create_schedule(C.op)
CC = s.cache_write(C, "global")
mo, no, mi, ni = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
s[CC].compute_at(s[C], no)
mc, nc = s[CC].op.axis
(kaxis,) = s[CC].op.reduce_axis
ko, ki = s[CC].split(kaxis, factor=kfactor)
s[CC].reorder(ko, mc, ki, nc)
s[CC].vectorize(nc)
s[CC].unroll(ki)
"""

_GEMM_CHECK = """func = asc.build(s, [A, B, C], target=target, name="mmult")
assert func
c = np.zeros((M, N), dtype=dtype)
func(a, b, c)
np.testing.assert_allclose(c, answer, rtol=1e-5)  # runtime
print("time: %f" % min(func.time(a, b, c, repeat=1)))  # runtime
print(asc.lower(s, [A, B, C], simple_mode=True))"""

OPT_GEMM = (
    """
M = 1024
K = 1024
N = 1024
dtype = "float32"
target = "c"
a = np.random.rand(M, K).astype(dtype)
b = np.random.rand(K, N).astype(dtype)
answer = np.dot(a, b)
k = asc.reduce_axis((0, K), "k")
A = asc.placeholder((M, K), name="A")
B = asc.placeholder((K, N), name="B")
C = asc.compute((M, N), lambda m, n: asc.sum(A[m, k] * B[k, n], axis=k), name="C")
s = asc.create_schedule(C.op)
"""
    + _GEMM_CHECK
    + _GEMM_STEPS.replace("CHECK", _GEMM_CHECK)
    .replace("TILE\n", _GEMM_TILE.lstrip("\n"))
    .replace("CACHE\n", _GEMM_CACHE.lstrip("\n"))
)

GET_STARTED = """
tgt = asc.Target(target="c", host="c")
n = asc.var("n")
A = asc.placeholder((n,), name="A")
B = asc.placeholder((n,), name="B")
C = asc.compute(A.shape, lambda i: A[i] + B[i], name="C")
s = asc.create_schedule(C.op)
fadd = asc.build(s, [A, B, C], tgt, name="myadd")
n = 1024
a = np.random.uniform(size=n).astype(A.dtype)
b = np.random.uniform(size=n).astype(B.dtype)
c = np.zeros(n, dtype=C.dtype)
fadd(a, b, c)
np.testing.assert_allclose(c, a + b)  # runtime
s[C].parallel(C.op.axis[0])
print(asc.lower(s, [A, B, C], simple_mode=True))
fadd_parallel = asc.build(s, [A, B, C], tgt, name="myadd_parallel")
fadd_parallel(a, b, c)
np.testing.assert_allclose(c, a + b)  # runtime
n = asc.var("n")
A = asc.placeholder((n,), name="A")
B = asc.placeholder((n,), name="B")
C = asc.compute(A.shape, lambda i: A[i] + B[i], name="C")
s = asc.create_schedule(C.op)
factor = 4
outer, inner = s[C].split(C.op.axis[0], factor=factor)
s[C].parallel(outer)
s[C].vectorize(inner)
fadd_vector = asc.build(s, [A, B, C], tgt, name="myadd_parallel")
print("vector: %f" % min(fadd_vector.time(a, b, c)))  # runtime
print(asc.lower(s, [A, B, C], simple_mode=True))
fadd_vector(a, b, c)  # runtime
np.testing.assert_allclose(c, a + b)  # runtime
"""
