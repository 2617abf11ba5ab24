"""The zoo build refuses a degenerate member (issue 29): transformers' random init made MobileNetV2's logits
~1e-25 and EfficientNet's exactly 0 for every sample, so every comparison on them was trivially perfect."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

from tests.fixtures.helpers import init, make_model, save, vi

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from zoolib.export import refuse_degenerate, refusal  # noqa: E402


def _scaled(path: Path, scale: float) -> Path:
    """y = x * scale (a float output), n = Shape(x) (an integer output, never checked)."""
    nodes = [helper.make_node("Mul", ["x", "k"], ["y"], name="mul"), helper.make_node("Shape", ["x"], ["n"], name="shape")]
    return save(make_model(nodes, [vi("x", [1, 4])], [vi("y", [1, 4]), vi("n", [2], 7)],
                           [init("k", np.array(scale, np.float32))]), path)


def test_an_output_constant_over_the_samples_is_refused(tmp_path):
    samples = [{"x": np.full((1, 4), float(i), np.float32)} for i in range(1, 4)]
    refuse_degenerate(_scaled(tmp_path / "healthy.onnx", 1.0), samples, ["y", "n"])  # spread 2: accepted
    with pytest.raises(ValueError, match=r"output 'y' is the same for all 3 samples \(spread 2e-25"):
        refuse_degenerate(_scaled(tmp_path / "vanishing.onnx", 1e-25), samples, ["y", "n"])
    with pytest.raises(ValueError, match=r"output 'y' is the same for all 3 samples \(spread 0, max \|value\| 0\)"):
        refuse_degenerate(_scaled(tmp_path / "zero.onnx", 0.0), samples, ["y", "n"])


def test_a_member_built_to_be_refused_must_be_refused_so(tmp_path):
    """`Spec.refused` (issue 41): the zoo keeps such a member only when onnxruntime refuses it with the expected
    message; one that loads, or is refused for another reason, tests nothing about mi's refusal."""
    dup = make_model([helper.make_node("Relu", ["x"], ["t"], name="n"), helper.make_node("Neg", ["t"], ["y"], name="n")],
                     [vi("x", [1, 4])], [vi("y", [1, 4])])
    message = refusal(save(dup, tmp_path / "dup.onnx"), "two nodes with same node name")
    assert "two nodes with same node name (n)" in message
    with pytest.raises(ValueError, match="onnxruntime loads it"):
        refusal(_scaled(tmp_path / "fine.onnx", 1.0), "two nodes with same node name")
    with pytest.raises(ValueError, match="but not with"):
        refusal(save(dup, tmp_path / "dup2.onnx"), "Graph output")
