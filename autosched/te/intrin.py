"""Tensor intrinsics (what ``decl_tensor_intrin`` declares): a small compute over placeholders, the
buffers its tensors are passed as, and its implementation in C, for ``s[T].tensorize``.

The implementation is the body of a file-scope ``static inline void`` function (intrinsics
allowed) whose parameters are the output pointer, the input pointers (each pointing at the first
element of the region it covers) and the ``int`` stride variables the buffers declare, all named
as declared. It comes whole (``body``), or split as TVM's ``(body, reset, update)`` so that a
reduction can be initialised by the intrinsic (``reset``) and accumulated into (``update``)
across an outer reduction loop. Intrinsics are registered by name, so a recorded tensorize step
replays in a later session that declares the same intrinsic.
"""

from __future__ import annotations

import hashlib
import keyword
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..dtypes import dtype as _dtype
from .dag import dag_key
from .nodes import Expr, Extent, Load, Var
from .tensor import ComputeOp, Operation, PlaceholderOp, Tensor
from .traverse import children

PARTS = ("body", "reset", "update")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_C_KEYWORDS = frozenset(
    [
        "auto",
        "break",
        "case",
        "char",
        "const",
        "continue",
        "default",
        "do",
        "double",
        "else",
        "enum",
        "extern",
        "float",
        "for",
        "goto",
        "if",
        "inline",
        "int",
        "long",
        "register",
        "restrict",
        "return",
        "short",
        "signed",
        "sizeof",
        "static",
        "struct",
        "switch",
        "typedef",
        "union",
        "unsigned",
        "void",
        "volatile",
        "while",
    ]
)


@dataclass(frozen=True, slots=True)
class IntrinBuffer:
    """How a tensor of an intrinsic is passed: a pointer named ``name`` with element ``strides``
    per dimension (ints, or ``asc.var`` variables that become ``int`` parameters; ``None``:
    compact row-major)."""

    name: str
    shape: tuple[Extent, ...]
    dtype: str
    strides: tuple[Extent, ...] | None = None

    @property
    def data(self) -> str:
        """The pointer's name in the C body (TVM's ``buffer.data``)."""
        return self.name

    def access_ptr(self, *_: object, **__: object) -> str:
        """TVM's TIR pointer: not here, where an intrinsic's implementation is C text."""
        raise TypeError(
            f"buffer {self.name!r}: access_ptr builds TIR; here fcompute returns the C body (a "
            f"string, or (body, reset, update)) that uses the pointer {self.data!r} directly"
        )


@dataclass(frozen=True, slots=True)
class CImpl:
    """The C of an intrinsic: ``body`` computes the region whole; ``reset`` sets the output region
    to the reduction's identity and ``update`` accumulates into it. ``preamble`` is file-scope C
    printed once before the functions (includes, helpers, ISA-specific kernels);
    ``portable_preamble`` replaces it in strict C99 builds (``None``: the same text)."""

    body: str | None = None
    reset: str | None = None
    update: str | None = None
    preamble: str = ""
    portable_preamble: str | None = None


@dataclass(frozen=True, eq=False, slots=True)
class TensorIntrin:
    """A declared tensor intrinsic (see the module docstring)."""

    name: str
    op: ComputeOp
    inputs: tuple[Tensor, ...]
    buffers: dict[str, IntrinBuffer]  # tensor name -> how it is passed
    impl: CImpl
    stride_vars: tuple[Var, ...]
    key: str  # a digest of the whole declaration: distinct intrinsics get distinct C names
    requires: tuple[str, ...] = ()  # CPU extensions (/proc/cpuinfo names) its C needs outside portable builds

    @property
    def output(self) -> Tensor:
        return self.op.output(0)

    def buffer(self, t: Tensor) -> IntrinBuffer:
        return self.buffers[t.name]

    def strides(self, t: Tensor) -> tuple[Extent, ...]:
        """The element strides ``t`` is passed with (compact row-major unless declared)."""
        decl = self.buffers[t.name]
        if decl.strides is not None:
            return decl.strides
        out: list[int] = []
        n = 1
        for d in reversed(t.shape):
            out.insert(0, n)
            assert isinstance(d, int)  # intrinsic shapes are fixed (checked at declaration)
            n *= d
        return tuple(out)

    def c_name(self, part: str) -> str:
        """The C name of one part's function."""
        base = re.sub(r"[^A-Za-z0-9_]", "_", self.name)
        return f"asc_intrin_{base}_{self.key[:8]}_{part}"

    def c_helpers(self, part: str, portable: bool) -> list[tuple[str, str]]:
        """(key, text) of the file-scope C one part needs: the preamble (keyed by its text, so it
        is printed once for every part and intrinsic sharing it), then the part's function."""
        code = getattr(self.impl, part)
        if code is None:
            raise ValueError(f"tensor intrinsic {self.name!r} has no {part!r} implementation")
        out = self.buffer(self.output)
        params = [f"{_dtype(out.dtype).c_name}* restrict {out.name}"]
        params += [f"const {_dtype(t.dtype).c_name}* restrict {self.buffer(t).name}" for t in self.inputs]
        params += [f"int {v.name}" for v in self.stride_vars]
        names = [out.name, *(self.buffer(t).name for t in self.inputs), *(v.name for v in self.stride_vars)]
        unused = " ".join(f"(void){n};" for n in names)
        preamble = self.impl.preamble
        if portable and self.impl.portable_preamble is not None:
            preamble = self.impl.portable_preamble
        func = f"static inline void {self.c_name(part)}({', '.join(params)}) {{\n  {unused}\n{code}\n}}"
        helpers = [(self.c_name(part), func)]
        if preamble.strip():
            digest = hashlib.sha256(preamble.encode()).hexdigest()[:16]
            helpers.insert(0, (f"asc_preamble_{digest}", preamble.strip()))
        return helpers


#: declared intrinsics by name (a later declaration of a name replaces the earlier one for the
#: steps applied after it; schedules keep the intrinsic they were given)
INTRINS: dict[str, TensorIntrin] = {}


#: functions that declare an intrinsic from its name alone (``None``: not one of theirs), so that a
#: recorded tensorize step naming a library intrinsic replays in a process that has not declared it
RESOLVERS: list[Callable[[str], TensorIntrin | None]] = []


def lookup_intrin(name: str) -> TensorIntrin | None:
    """The intrinsic declared as ``name``, else one a resolver declares from the name, else None."""
    intrin = INTRINS.get(name)
    if intrin is None:
        intrin = next((found for r in RESOLVERS if (found := r(name)) is not None), None)
    return intrin


def get_intrin(name: str) -> TensorIntrin:
    """The intrinsic declared as ``name`` (or declared now from its name: :data:`RESOLVERS`)."""
    intrin = lookup_intrin(name)
    if intrin is None:
        known = ", ".join(sorted(INTRINS)) or "none"
        raise KeyError(f"no tensor intrinsic named {name!r} is declared (declared: {known})")
    return intrin


ImplLike = str | CImpl | tuple[str | None, str | None, str | None]


def _as_impl(value: Any, name: str) -> CImpl:
    if isinstance(value, CImpl):
        impl = value
    elif isinstance(value, str):
        impl = CImpl(body=value)
    elif isinstance(value, (tuple, list)) and len(value) == 3:
        impl = CImpl(*value)
    else:
        raise TypeError(
            f"decl_tensor_intrin {name!r}: the implementation must be C text, a (body, reset, update) "
            f"triple of C texts (None where absent) or an asc.intrin.CImpl, got {type(value).__name__}"
        )
    for part in PARTS:
        code = getattr(impl, part)
        if code is not None and not isinstance(code, str):
            raise TypeError(f"decl_tensor_intrin {name!r}: {part} must be C text, got {type(code).__name__}")
    if impl.body is None and impl.update is None:
        raise ValueError(f"decl_tensor_intrin {name!r}: give a body, or an update (with a reset)")
    if impl.update is not None and impl.reset is None and impl.body is None:
        raise ValueError(f"decl_tensor_intrin {name!r}: an update needs a reset or a body to start from")
    return impl


def _reads(e: Expr) -> tuple[Tensor, ...]:
    """The tensors ``e`` reads, in order of first appearance from the left (TVM's ``ins`` order)."""
    out: list[Tensor] = []
    stack = [e]
    while stack:
        node = stack.pop()
        if isinstance(node, Load) and node.tensor not in out:
            out.append(node.tensor)
        stack.extend(reversed(children(node)))
    return tuple(out)


def _check_ident(text: str, what: str) -> str:
    if not isinstance(text, str) or not _IDENT.match(text) or text in _C_KEYWORDS or keyword.iskeyword(text):
        raise ValueError(f"{what} {text!r} must be a C identifier (letters, digits, _; not a keyword)")
    if text.startswith("asc_"):
        raise ValueError(f"{what} {text!r}: names starting with asc_ are reserved for autosched")
    return text


def decl_tensor_intrin(
    op: Operation | Tensor,
    fcompute_or_impl: ImplLike | Callable[[list[IntrinBuffer], list[IntrinBuffer]], ImplLike],
    name: str | None = None,
    binds: dict[Tensor, Any] | None = None,
    *,
    requires: tuple[str, ...] = (),
    **tvm_options: Any,
) -> TensorIntrin:
    """Declare a tensor intrinsic: ``op`` (a compute over placeholders with fixed extents) and its
    C implementation (see :class:`CImpl`), or a function ``(ins, outs) -> implementation`` called
    with the declared buffers, as TVM's ``fcompute``. ``binds`` gives tensors their buffers
    (:func:`decl_buffer`: names and strides); unbound tensors are passed compactly under their
    own names. ``requires`` names the CPU extensions (``/proc/cpuinfo`` flags, e.g.
    ``("avx512_vnni",)``) the C uses unconditionally: a kernel calling it records them, and
    refuses to load on a CPU without them. ``scalar_params`` and ``default_buffer_params`` (TVM)
    are not supported.
    """
    cop = op.op if isinstance(op, Tensor) else op
    if not isinstance(cop, ComputeOp) or cop.num_outputs != 1:
        raise ValueError("decl_tensor_intrin: op must be a compute with one output (placeholder inputs)")
    label = name if name is not None else cop.name
    if tvm_options:
        raise ValueError(f"decl_tensor_intrin {label!r}: unsupported options {sorted(tvm_options)}")
    inputs = _reads(cop.body)
    for t in inputs:
        if not isinstance(t.op, PlaceholderOp):
            raise ValueError(f"decl_tensor_intrin {label!r}: {t.name} must be a placeholder, not a compute")
    sizes = [*cop.shape, *(iv.extent for iv in cop.reduce_axis)] + [d for t in inputs for d in t.shape]
    if any(not isinstance(d, int) for d in sizes):
        raise ValueError(f"decl_tensor_intrin {label!r}: the intrinsic's shapes and extents must be fixed")
    given = {t.name: b for t, b in (binds or {}).items()}
    buffers: dict[str, IntrinBuffer] = {}
    for t in (*inputs, cop.output(0)):
        decl = given.pop(t.name, None) or IntrinBuffer(t.name, tuple(t.shape), t.dtype)
        if tuple(decl.shape) != tuple(t.shape) or decl.dtype != t.dtype:
            raise ValueError(
                f"decl_tensor_intrin {label!r}: buffer {decl.name!r} is {decl.dtype}{list(decl.shape)}, "
                f"tensor {t.name} is {t.dtype}{list(t.shape)}"
            )
        strides = getattr(decl, "strides", None)  # any decl_buffer-like object: name, shape, dtype, strides
        buffers[t.name] = IntrinBuffer(
            _check_ident(decl.name, "buffer name"),
            tuple(decl.shape),
            decl.dtype,
            None if strides is None else tuple(strides),
        )
    if given:
        raise ValueError(
            f"decl_tensor_intrin {label!r}: binds name tensors the op does not use: {sorted(given)}"
        )
    stride_vars: list[Var] = []
    for decl in buffers.values():
        for s in decl.strides or ():
            if isinstance(s, Var) and s not in stride_vars:
                stride_vars.append(s)
            elif not isinstance(s, (int, Var)):
                raise ValueError(f"decl_tensor_intrin {label!r}: a stride is an int or an asc.var, got {s}")
    names = [d.name for d in buffers.values()] + [
        _check_ident(v.name, "stride variable") for v in stride_vars
    ]
    if len(set(names)) != len(names):
        raise ValueError(f"decl_tensor_intrin {label!r}: parameter names repeat: {names}")
    outs = [buffers[cop.name]]
    ins = [buffers[t.name] for t in inputs]
    impl = _as_impl(fcompute_or_impl(ins, outs) if callable(fcompute_or_impl) else fcompute_or_impl, label)
    need = tuple(sorted(set(requires)))
    text = repr((dag_key([cop.output(0)]), sorted((k, repr(v)) for k, v in buffers.items()), impl, need))
    key = hashlib.sha256(text.encode()).hexdigest()
    intrin = TensorIntrin(label, cop, inputs, buffers, impl, tuple(stride_vars), key, need)
    INTRINS[label] = intrin
    return intrin
