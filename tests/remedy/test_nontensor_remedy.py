"""The fix-it tier on outputs that are not numeric tensors (issue 29, the whole-zoo feature sweep): the
plan's evaluator and --bisect-optimizers compared string, ZipMap (list of dicts) and sequence outputs
with float(), so `--fallback-plan` / `--bisect-optimizers` on sklearn_str, sklearn_zipmap and seqlist
exited 4 ("could not convert string to float", "float() argument ... not 'dict'", "setting an array
element with a sequence"), and an fp16 model whose only float16 value is its input went down the QDQ
path (exit 3). Each test below fails on the code before these fixes."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from onnx import TensorProto, helper

from inspector_cli.remedy.compare_run import is_fp16
from inspector_cli.remedy.evaluate import Evaluator, parse_target
from inspector_cli.remedy.optbisect import _Bisector


def _evaluator(reference):
    ev = Evaluator(samples=[{}] * len(reference), sample_ids=[f"s{i}" for i in range(len(reference))],
                   targets=[parse_target("cosine>=0.99")])
    ev.reference = reference
    return ev


def _zipmap(p):
    return [{0: float(p[0]), 1: float(p[1])}]


def test_evaluator_reads_zipmap_probabilities_and_string_labels():
    ref = [{"label": np.array(["zero"], dtype=object), "probs": _zipmap([0.6, 0.8])}]
    ev = _evaluator(ref)
    same = ev.judge([{"label": np.array(["zero"], dtype=object), "probs": _zipmap([0.6, 0.8])}])
    assert same.meets and abs(same.metrics["probs"]["cosine"] - 1.0) < 1e-12
    # probabilities (0.6, 0.8) vs (0.8, 0.6): cosine 0.96 (hand-computed: 0.48 + 0.48)
    worse = ev.judge([{"label": np.array(["zero"], dtype=object), "probs": _zipmap([0.8, 0.6])}])
    assert abs(worse.metrics["probs"]["cosine"] - 0.96) < 1e-12 and not worse.meets
    relabelled = ev.judge([{"label": np.array(["one"], dtype=object), "probs": _zipmap([0.6, 0.8])}])
    assert not relabelled.meets  # a changed label misses the targets whatever the cosine


def test_evaluator_on_a_ragged_sequence_and_its_nan():
    ref = [{"frames": [np.ones((1, 2), np.float32), np.ones((1, 3), np.float32)]}]
    ev = _evaluator(ref)
    assert ev.judge([{"frames": [np.ones((1, 2), np.float32), np.ones((1, 3), np.float32)]}]).meets
    bad = ev.judge([{"frames": [np.ones((1, 2), np.float32), np.array([[1, np.nan, 1]], np.float32)]}])
    assert bad.nonfinite_samples == ["s0"] and not bad.meets
    shorter = ev.judge([{"frames": [np.ones((1, 2), np.float32)]}])
    assert not shorter.meets  # another sequence length: no match


def test_bisector_diff_on_strings_and_zipmap(tmp_path: Path):
    bisector = _Bisector.__new__(_Bisector)
    bisector.atol, bisector.rtol = 1e-5, 1e-5
    bisector.reference = [{"label": np.array(["zero"], dtype=object), "probs": _zipmap([0.6, 0.8])}]
    assert bisector.max_diff([{"label": np.array(["zero"], dtype=object), "probs": _zipmap([0.6, 0.8])}]) == (False, 0.0)
    differs, worst = bisector.max_diff([{"label": np.array(["zero"], dtype=object), "probs": _zipmap([0.6, 0.9])}])
    assert differs and abs(worst - 0.1) < 1e-9
    assert bisector.max_diff([{"label": np.array(["one"], dtype=object), "probs": _zipmap([0.6, 0.8])}])[0]


def _tiny(opset: int, input_type: int = TensorProto.FLOAT):
    """x (input_type) -> Cast -> y (float): an fp16 input is the model's only float16 value."""
    graph = helper.make_graph([helper.make_node("Cast", ["x"], ["y"], name="cast", to=TensorProto.FLOAT)], "g",
                              [helper.make_tensor_value_info("x", input_type, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_fp16_inputs_alone_make_an_fp16_model():
    # skl2onnx's tree ensemble converted to fp16 has no float16 weight or output, only its input
    assert is_fp16(_tiny(17, TensorProto.FLOAT16)) and not is_fp16(_tiny(17))


def test_fp16_overflow_scan_skips_sequence_tensors():
    """The whole-zoo feature sweep of 2026-12-04: `--fallback-plan` on seqlist's fp16 variants exited 4
    ("'list' object has no attribute 'dtype'"): when the plain conversion misses the target, the overflow
    scan of the fp32 run read a sequence value's dtype. x[2, 3] -> SplitToSequence (a sequence, exposed like
    every node output) and y = x * 7e4 (beyond fp16's 65504): the scan names Mul and its consumer, no error."""
    from inspector_cli.core.runner import RuntimeConfig
    from inspector_cli.remedy.fp16_plan import _overflow_sources

    nodes = [helper.make_node("SplitToSequence", ["x"], ["parts"], name="split", axis=0),
             helper.make_node("Mul", ["x", "k"], ["y"], name="big"),
             helper.make_node("Relu", ["y"], ["z"], name="relu")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor("k", TensorProto.FLOAT, [], [7e4])])
    graph.output.append(helper.make_tensor_sequence_value_info("parts", TensorProto.FLOAT, None))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    samples = [{"x": np.ones((2, 3), np.float32)}]
    assert _overflow_sources(model, samples, RuntimeConfig()) == ["big", "relu"]
