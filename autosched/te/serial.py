"""Expressions to JSON and back, for schedule steps that carry one (a store predicate).

Only what a condition over loop variables needs is written: constants, variables, arithmetic,
comparisons, logic, selects, casts and math calls; tensor reads and reductions are refused.
Reading checks every field, since tuning logs are untrusted input: a malformed or too deeply
nested value is a ``ValueError``.
"""

from __future__ import annotations

import math
from typing import Any

from ..dtypes import dtype as _dtype
from .nodes import (
    BINARY_OPS,
    COMPARE_OPS,
    MATH_FUNCS,
    BinOp,
    Call,
    Cast,
    Cmp,
    Const,
    Expr,
    Logic,
    Not,
    Select,
    Var,
    to_str,
)

MAX_DEPTH = 64


def expr_to_json(e: Expr) -> Any:
    """A JSON-compatible nested list for ``e``; ``ValueError`` for reads and reductions."""
    if isinstance(e, Const):
        return ["const", e.value, e.type]
    if isinstance(e, Var):
        return ["var", e.name, e.type]
    if isinstance(e, BinOp):
        return ["bin", e.op, expr_to_json(e.a), expr_to_json(e.b), e.type]
    if isinstance(e, Cmp):
        return ["cmp", e.op, expr_to_json(e.a), expr_to_json(e.b)]
    if isinstance(e, Logic):
        return ["logic", e.op, expr_to_json(e.a), expr_to_json(e.b)]
    if isinstance(e, Not):
        return ["not", expr_to_json(e.a)]
    if isinstance(e, Select):
        return ["select", expr_to_json(e.cond), expr_to_json(e.true_value), expr_to_json(e.false_value)]
    if isinstance(e, Cast):
        return ["cast", e.type, expr_to_json(e.value)]
    if isinstance(e, Call):
        return ["call", e.name, [expr_to_json(a) for a in e.args], e.type]
    raise ValueError(f"only loop variables, constants and arithmetic can be recorded here, not {to_str(e)}")


def _str(x: Any) -> str:
    if type(x) is not str or not x or len(x) > 200:
        raise ValueError(f"expected a short non-empty string, got {x!r}")
    return x


def _type(x: Any) -> str:
    return _dtype(_str(x)).name


def _choice(x: Any, allowed: tuple[str, ...]) -> str:
    if x not in allowed:
        raise ValueError(f"expected one of {allowed}, got {x!r}")
    return str(x)


def expr_from_json(data: Any, depth: int = 0) -> Expr:
    """Rebuild an expression written by :func:`expr_to_json`, checking every field."""
    if depth > MAX_DEPTH:
        raise ValueError(f"expression nested deeper than {MAX_DEPTH}")
    if type(data) is not list or not data or type(data[0]) is not str:
        raise ValueError(f"not an expression: {str(data)[:80]}")
    tag, args = data[0], data[1:]
    arity = {
        "const": 2,
        "var": 2,
        "bin": 4,
        "cmp": 3,
        "logic": 3,
        "not": 1,
        "select": 3,
        "cast": 2,
        "call": 3,
    }
    if tag not in arity or len(args) != arity[tag]:
        raise ValueError(f"not an expression: {str(data)[:80]}")

    def sub(x: Any) -> Expr:
        return expr_from_json(x, depth + 1)

    if tag == "const":
        value, ty = args[0], _type(args[1])
        if type(value) not in (int, float) or (type(value) is float and not math.isfinite(value)):
            raise ValueError(f"bad constant {value!r}")
        return Const(float(value) if _dtype(ty).is_float else int(value), ty)
    if tag == "var":
        return Var(_str(args[0]), _type(args[1]))
    if tag == "bin":
        return BinOp(_choice(args[0], BINARY_OPS), sub(args[1]), sub(args[2]), _type(args[3]))
    if tag == "cmp":
        return Cmp(_choice(args[0], COMPARE_OPS), sub(args[1]), sub(args[2]))
    if tag == "logic":
        return Logic(_choice(args[0], ("and", "or")), sub(args[1]), sub(args[2]))
    if tag == "not":
        return Not(sub(args[0]))
    if tag == "select":
        return Select(sub(args[0]), sub(args[1]), sub(args[2]))
    if tag == "cast":
        return Cast(_type(args[0]), sub(args[1]))
    if type(args[1]) is not list or len(args[1]) > 8:
        raise ValueError("bad call arguments")
    return Call(_choice(args[0], MATH_FUNCS), tuple(sub(a) for a in args[1]), _type(args[2]))
