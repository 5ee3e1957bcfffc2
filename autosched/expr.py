"""Tensor expressions: the DAG a user writes with ``placeholder``, ``compute`` and ``reduce_axis``.

This is the te-facing module: every name of the expression layer is importable from here. The
definitions live in :mod:`autosched.te` (nodes, traversal, functions, tensors, DAG helpers), in
modules that import one way only; this module only gathers them.

Expression nodes are small frozen dataclasses, so two expressions that print the same are equal and
hash the same. Operations (``PlaceholderOp``, ``ComputeOp``) are compared by identity: a DAG is a
graph of operations, each named, and its structural key comes from :func:`dag_key`.

Comparison operators ``<``, ``<=``, ``>``, ``>=`` build comparison nodes; ``==`` and ``!=`` keep
their Python meaning (structural equality), so use :func:`equal` / :func:`not_equal` in a compute.
"""

from __future__ import annotations

from .te.dag import as_tensors, dag_key, op_to_str, topo_order
from .te.functions import (
    abs,
    all,
    ceil,
    equal,
    erf,
    exp,
    floor,
    if_then_else,
    log,
    max,
    min,
    not_equal,
    pow,
    sigmoid,
    sqrt,
    sum,
    tanh,
)
from .te.nodes import (
    BINARY_OPS,
    COMPARE_OPS,
    INFIX,
    MATH_FUNCS,
    REDUCERS,
    BinOp,
    Call,
    Cast,
    Cmp,
    Const,
    Expr,
    ExprLike,
    IterVar,
    Load,
    Logic,
    Not,
    Reduce,
    Select,
    Var,
    as_expr,
    binary,
    cast,
    compare,
    const,
    logic,
    to_str,
)
from .te.reducers import CommReducer, Reducer, comm_reducer, max_value, min_value
from .te.scan import scan
from .te.tensor import (
    ComputeOp,
    Operation,
    PlaceholderOp,
    ScanOp,
    Tensor,
    compute,
    placeholder,
    reduce_axis,
)
from .te.traverse import children, rewrite, substitute, walk

__all__ = [
    "BINARY_OPS",
    "COMPARE_OPS",
    "CommReducer",
    "Reducer",
    "ScanOp",
    "comm_reducer",
    "max_value",
    "min_value",
    "scan",
    "INFIX",
    "MATH_FUNCS",
    "REDUCERS",
    "BinOp",
    "Call",
    "Cast",
    "Cmp",
    "ComputeOp",
    "Const",
    "Expr",
    "ExprLike",
    "IterVar",
    "Load",
    "Logic",
    "Not",
    "Operation",
    "PlaceholderOp",
    "Reduce",
    "Select",
    "Tensor",
    "Var",
    "abs",
    "all",
    "as_expr",
    "as_tensors",
    "binary",
    "cast",
    "ceil",
    "children",
    "compare",
    "compute",
    "const",
    "dag_key",
    "equal",
    "erf",
    "exp",
    "floor",
    "if_then_else",
    "log",
    "logic",
    "max",
    "min",
    "not_equal",
    "op_to_str",
    "placeholder",
    "pow",
    "reduce_axis",
    "rewrite",
    "sigmoid",
    "sqrt",
    "substitute",
    "sum",
    "tanh",
    "to_str",
    "topo_order",
    "walk",
]
