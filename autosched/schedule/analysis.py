"""What a stage of a compute DAG is, read from its expression alone: who reads it, whether it
reuses data, whether it is cheap to inline, whether a consumer can run as its epilogue. Sketch
rules (:mod:`autosched.space`) and the default GPU schedules (:mod:`autosched.backends`) decide by
these.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..expr import ComputeOp, Load, Reduce, Select, Var, walk


def consumers(ops: Sequence[ComputeOp], name: str) -> list[ComputeOp]:
    """Compute ops that read tensor ``name``."""
    return [op for op in ops if any(t.name == name for t in op.input_tensors)]


def has_data_reuse(op: ComputeOp) -> bool:
    """A reduction in which some input is read without some spatial index: its elements are
    reused across that axis, so tiling for locality pays (matmul, conv2d)."""
    if not isinstance(op.body, Reduce):
        return False
    spatial = {iv.var for iv in op.axis}
    for node in walk(op.body):
        if isinstance(node, Load):
            used = {v for i in node.indices for v in walk(i) if isinstance(v, Var)}
            if spatial - used:
                return True
    return False


def is_strict_inlinable(op: ComputeOp, outputs: set[str]) -> bool:
    """Elementwise, without a reduction or a branch, and not an output: always worth inlining."""
    if op.name in outputs or isinstance(op.body, Reduce):
        return False
    return not any(isinstance(n, Select) for n in walk(op.body))


def is_fusible_consumer(producer: ComputeOp, consumer: ComputeOp) -> bool:
    """``consumer`` is elementwise over the same iteration space and reads ``producer`` only at its
    own index: it can run on the producer's outer tiles (an epilogue)."""
    if isinstance(consumer.body, Reduce) or consumer.shape != producer.shape:
        return False
    own = tuple(iv.var for iv in consumer.axis)
    reads = [n for n in walk(consumer.body) if isinstance(n, Load) and n.tensor.name == producer.name]
    return bool(reads) and all(tuple(r.indices) == own for r in reads)
