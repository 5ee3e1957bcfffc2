"""Bad input to extern stages and C calls: each is one clear error, and no user name reaches the
compiler's command line as a flag or a shell word."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import autosched as asc
from autosched.expr import CCode
from autosched.reference import evaluate
from autosched.runner.compile import MissingCFunction, compile_shared
from autosched.schedule import ScheduleError
from autosched.target import Target

N = 16


def copy_call(name: str = "copy_fn", **code: object):  # noqa: ANN201 - an fcompute
    return lambda ins, outs: asc.call_extern("void", name, ins[0].data, outs[0].data, N, **code)


@pytest.fixture
def A() -> asc.Tensor:
    return asc.placeholder((N,), name="A")


@pytest.mark.requires("gcc")
def test_a_c_function_that_exists_nowhere(A: asc.Tensor) -> None:
    B = asc.extern((N,), [A], copy_call("no_such_function"), name="B")
    s = asc.create_schedule(B.op)
    with pytest.raises(MissingCFunction, match="^the C function 'no_such_function' that the kernel calls "
                       "does not exist: define it in c_source=") as info:
        asc.build(s, [A, B])
    assert info.value.symbol == "no_such_function"


@pytest.mark.requires("gcc", "openblas")
def test_a_declared_function_whose_library_is_not_linked(A: asc.Tensor) -> None:
    B = asc.extern((N,), [A], lambda ins, outs: asc.call_extern(
        "void", "cblas_scopy", N, ins[0].data, 1, outs[0].data, 1), name="B", headers=["cblas.h"])
    with pytest.raises(MissingCFunction, match="'cblas_scopy' that the kernel calls does not exist"):
        asc.build(asc.create_schedule(B.op), [A, B])
    C = asc.extern((N,), [A], lambda ins, outs: asc.call_extern(
        "void", "cblas_scopy", N, ins[0].data, 1, outs[0].data, 1), name="C", headers=["cblas.h"],
        libs=["openblas"])
    f = asc.build(asc.create_schedule(C.op), [A, C])
    a, c = np.arange(N, dtype=np.float32), np.zeros(N, np.float32)
    f(a, c)
    np.testing.assert_array_equal(c, a)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("libs", "m; rm -rf /"),
        ("libs", "-fplugin=x"),
        ("libs", "$(touch pwned)"),
        ("include_dirs", "-I/etc"),
        ("include_dirs", "a b"),
        ("lib_dirs", "-Wl,-rpath=/tmp"),
        ("headers", "stdio.h> /* x"),
        ("headers", "-include"),
    ],
)
def test_hostile_names_are_refused(A: asc.Tensor, field: str, value: str) -> None:
    with pytest.raises(ValueError, match=r"^refusing .*\(a plain name, not a flag or a shell word\)$"):
        asc.extern((N,), [A], copy_call(), name="B", **{field: [value]})
    with pytest.raises(ValueError, match="^refusing"):
        asc.call_extern("float32", "f", A[0], **{field: value})


@pytest.mark.parametrize("name", ["f(); system", "-f", "1f", "a.b", ""])
def test_bad_c_function_names(name: str) -> None:
    with pytest.raises(ValueError, match="^refusing C function name"):
        asc.call_extern("void", name)


def test_extern_shapes_that_disagree(A: asc.Tensor) -> None:
    with pytest.raises(ValueError, match=r"in_buffers\[0\] 'xb' is float32\[8\] but the input .*\[16\]"):
        asc.extern((N,), [A], copy_call(), in_buffers=[asc.decl_buffer((8,), name="xb")])
    with pytest.raises(ValueError, match=r"out_buffers\[0\] 'yb' is int32\[16\] .* float32\[16\]"):
        asc.extern((N,), [A], copy_call(), out_buffers=[asc.decl_buffer((N,), "int32", name="yb")])
    with pytest.raises(ValueError, match="must be 2 buffers"):
        asc.extern([(N,), (N,)], [A], copy_call(), out_buffers=[asc.decl_buffer((N,))])
    with pytest.raises(ValueError, match="not row-major"):  # strided buffers are for tensor intrinsics
        asc.extern((4, 4), [asc.placeholder((4, 4), name="M")], copy_call(),
                   in_buffers=[asc.decl_buffer((4, 4), strides=(1, 4), name="mb")])
    with pytest.raises(ValueError, match="elem_offset must be 0"):
        asc.decl_buffer((4,), elem_offset=2)
    X, Y = asc.placeholder((4, 5), name="X"), asc.placeholder((6, 7), name="Y")
    with pytest.raises(ValueError, match=r"shapes A\[4, 5\] x B\[6, 7\] -> C\[4, 7\] disagree"):
        asc.extern((4, 7), [X, Y], lambda ins, outs: asc.call_packed(
            "tvm.contrib.cblas.matmul", ins[0], ins[1], outs[0]), name="Z")
    other = asc.decl_buffer((N,), name="other")
    with pytest.raises(ValueError, match="uses buffer 'other', not one of ins/outs"):
        asc.extern((N,), [A], lambda ins, outs: asc.call_extern("void", "f", other.data))
    with pytest.raises(ValueError, match=r"uses variables \['q'\] that are neither its loops' nor shape"):
        asc.extern((N,), [A], lambda ins, outs: asc.call_extern("void", "f", asc.var("q")))
    with pytest.raises(TypeError, match="fcompute must return a call_extern"):
        asc.extern((N,), [A], lambda ins, outs: 3)


def test_packed_and_intrinsic_names_say_what_to_write() -> None:
    with pytest.raises(ValueError, match=r"no function of that name.*call_extern\('void', 'c_name'"):
        asc.call_packed("tvm.contrib.my_func", 1)
    with pytest.raises(ValueError, match=r"intrinsics are exp, .*call_pure_extern\('float32', 'c_name'"):
        asc.call_intrin("float32", "tir.atan2", 1.0, 2.0)


def test_extern_stages_are_not_scheduled(A: asc.Tensor) -> None:
    B = asc.extern((N,), [A], copy_call(), name="B")
    C = asc.compute((N,), lambda i: B[i] + 1.0, name="C")
    s = asc.create_schedule(C.op)
    for primitive in (lambda: s[B].split("i", 4), lambda: s[B].compute_at(s[C], C.op.axis[0]),
                      lambda: s[B].compute_inline(), lambda: s[B].parallel("i")):
        with pytest.raises(ScheduleError, match="B is an extern stage: its C computes it as written"):
            primitive()
    P = asc.compute((N,), lambda i: A[i] * 2.0, name="P")
    Q = asc.extern((N,), [P], copy_call(), name="Q")
    s = asc.create_schedule(Q.op)
    s[P].compute_inline()
    with pytest.raises(ScheduleError, match="P is read by the extern stage Q, which takes whole arrays"):
        asc.lower(s, [A, Q])
    with pytest.raises(NotImplementedError, match="C called by extern/call_extern"):
        evaluate([C], {"A": np.zeros(N, np.float32)})


def test_ir_builder_misuse() -> None:
    ib = asc.ir_builder.create()
    with pytest.raises(ValueError, match="else_scope must directly follow an if_scope"), ib.else_scope():
        pass
    with pytest.raises(ValueError, match="holds no statement"):
        ib.get()
    with pytest.raises(ValueError, match="extern loops are 'serial' or 'parallel'"), ib.for_range(
        0, 4, kind="vectorize"
    ):
        pass
    with pytest.raises(IndexError, match="one flat index"):
        ib.buffer_ptr(asc.decl_buffer((2, 2)))[0, 1]


@pytest.mark.requires("gcc")
def test_the_library_cache_key_includes_the_link_libraries(tmp_path: Path) -> None:
    src = "int answer(void) { return 42; }\n"
    target = Target.parse("c")
    plain = compile_shared(src, target, cache_dir=tmp_path)
    linked = compile_shared(src, target, cache_dir=tmp_path, code=CCode.of(libs=["m"]))
    assert plain != linked and plain.exists() and linked.exists()
    assert compile_shared(src, target, cache_dir=tmp_path, code=CCode.of(libs=["m"])) == linked
