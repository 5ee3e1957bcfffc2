"""ONNX Einsum: equations of one, two and three operands (batch, contracted and free indices,
ellipses, implicit outputs, broadcasting, sums of an operand's own index) imported, built and run
against onnxruntime; a constant operand as a dense layer; unsupported equations as one line."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="needs onnx (pip install onnx)")
pytest.importorskip("onnxruntime", reason="needs onnxruntime (pip install onnxruntime)")

from onnx_cases import compare, model, node, rand  # noqa: E402

import autosched as asc  # noqa: E402
from autosched.graph import GraphError  # noqa: E402

#: equation -> the shapes of its operands
CASES: dict[str, list[tuple[int, ...]]] = {
    # MaxViT's window attention, as torchvision writes it (capitals, spaces)
    "B G H I D, B G H J D -> B G H I J": [(1, 2, 3, 5, 4), (1, 2, 3, 6, 4)],
    "B G H I J, B G H J D -> B G H I D": [(1, 2, 3, 5, 6), (1, 2, 3, 6, 4)],
    "ij,jk->ik": [(5, 7), (7, 3)],
    "ij,kj->ki": [(5, 7), (3, 7)],
    "...ij,...jk->...ik": [(2, 3, 4, 5), (2, 3, 5, 6)],
    "...ij,jk": [(2, 4, 5), (5, 3)],  # implicit output: '...', then the indices seen once, sorted
    "bij,bjk->bik": [(1, 4, 5), (3, 5, 2)],  # b broadcasts from 1
    "i,j->ij": [(4,), (6,)],
    "ijk,jl->il": [(3, 4, 5), (4, 2)],  # k is summed in its own operand first
    "ij,jk,kl->il": [(3, 4), (4, 5), (5, 2)],
    "ij->ji": [(3, 5)],
    "ijk->ki": [(2, 3, 4)],
}


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("equation", list(CASES))
def test_einsum_matches_onnxruntime(equation: str) -> None:
    names = [f"x{i}" for i in range(len(CASES[equation]))]
    feeds = {n: rand(*s, seed=i) for i, (n, s) in enumerate(zip(names, CASES[equation], strict=True))}
    compare(model([node("Einsum", names, equation=equation)], feeds, ["y"]), feeds)


@pytest.mark.requires("gcc")
def test_a_constant_operand_without_batch_indices_is_a_dense_layer() -> None:
    x, w = rand(2, 4, 5), rand(3, 5, seed=1)
    proto = model([node("Einsum", ["x", "w"], equation="bij,kj->bik")], {"x": x}, ["y"], {"w": w})
    compare(proto, {"x": x})
    assert [n.op for n in asc.from_onnx(proto).nodes if n.op in ("dense", "batch_matmul")] == ["dense"]


@pytest.mark.parametrize(
    ("equation", "shapes", "message"),
    [("ii->i", [(3, 3)], "repeated within one operand"),
     ("ij,jk->ik", [(3, 4), (5, 2)], "an index has extents 4 and 5"),
     ("ij,jk->iz", [(3, 4), (4, 2)], "each output index must appear once"),
     ("ij1,jk->ik", [(3, 4, 1), (4, 2)], "is not letters and one optional '...'"),
     ("ijk,jk->ik", [(3, 4), (4, 2)], "does not fit an input of rank 2")],
)
def test_unsupported_or_wrong_equations_are_one_line(
    equation: str, shapes: list[tuple[int, ...]], message: str
) -> None:
    names = [f"x{i}" for i in range(len(shapes))]
    feeds = {n: np.zeros(s, np.float32) for n, s in zip(names, shapes, strict=True)}
    proto = model([node("Einsum", names, equation=equation)], feeds, ["y"], check=False)
    with pytest.raises(GraphError, match="Einsum node 'einsum': equation") as err:
        asc.from_onnx(proto)
    assert message in str(err.value) and "\n" not in str(err.value)
