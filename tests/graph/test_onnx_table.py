"""The importer's table of ONNX operators: the README's list is generated from it and kept equal,
``autosched ops --onnx`` prints it, and it covers the operators of the seeds' networks."""

from __future__ import annotations

from pathlib import Path

import pytest

from autosched.cli import main
from autosched.graph.onnx_doc import MARKERS, table_markdown, table_text, with_table
from autosched.graph.onnx_table import OPS

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_lists_the_operators_of_the_importer_table() -> None:
    text = README.read_text()
    assert MARKERS[0] in text and MARKERS[1] in text
    assert with_table(text) == text, (
        "README.md's ONNX operator table is out of date: put the output of "
        "`autosched ops --onnx --markdown` between the onnx-ops markers")


def test_ops_onnx_prints_every_operator_with_its_attributes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ops", "--onnx"]) == 0
    out = capsys.readouterr().out
    assert out == table_text()
    lines = out.splitlines()
    conv = lines.index(next(line for line in lines if line.split(", ")[0] == "Conv"))
    assert lines[conv + 1] == "    attributes: auto_pad, dilations, group, kernel_shape, pads, strides"
    assert main(["ops", "--markdown"]) == 0
    assert capsys.readouterr().out == table_markdown()


def test_the_table_covers_the_operators_of_issue_30() -> None:
    wanted = {"Clip", "HardSigmoid", "HardSwish", "LeakyRelu", "Tanh", "Sigmoid", "Erf", "Pow", "Sqrt",
              "Reciprocal", "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "Slice", "Split", "Squeeze",
              "Unsqueeze", "Gather", "MatMul", "Gemm", "MaxPool", "AveragePool", "ConvTranspose", "Conv",
              "GlobalAveragePool", "GlobalMaxPool", "BatchNormalization", "InstanceNormalization",
              "LayerNormalization", "LSTM", "GRU", "Resize", "Pad", "Flatten", "Transpose", "Dropout",
              "Identity", "Cast", "Shape", "Size", "Concat", "Add", "Sub", "Mul", "Div", "Mod", "Range",
              "Equal", "Where", "Expand", "ConstantOfShape", "Constant", "Reshape", "Softmax", "Relu"}
    assert wanted <= set(OPS)
    rows = table_markdown().splitlines()[2:]
    assert sum(len(r.split(" | ")[0].lstrip("| ").split(", ")) for r in rows) == len(OPS)  # each op once
