"""State wiring: found from signatures, given explicitly, refused when a state input is left over."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from inspector_cli.core.graph import load_model
from inspector_cli.core.types import TensorInfo
from inspector_cli.errors import UsageError
from inspector_cli.sequence import detect_wiring, initial_state, open_stepped, parse_pairs
from tests.fixtures.helpers import make_model, save, vi

F = TensorProto.FLOAT


def info(name: str, shape, elem: int = F) -> TensorInfo:
    return TensorInfo(name, elem, tuple(shape))


def test_state_to_stateN_and_h0_to_hn_by_name():
    wiring = detect_wiring([info("x", [1, 4]), info("state", [2, 1, 64]), info("h0", [1, 1, 8])],
                           [info("prob", [1, 1]), info("stateN", [2, 1, 64]), info("hn", [1, 1, 8])])
    assert [(p.input, p.output) for p in wiring.pairs] == [("state", "stateN"), ("h0", "hn")]
    assert wiring.step_inputs == ("x",) and wiring.step_outputs == ("prob",)
    assert wiring.describe().splitlines()[0] == "stateN -> state  (float32 [2, 1, 64], auto)"


def test_kv_cache_pairs_allow_the_growing_axis_but_not_a_dtype_change():
    kv = detect_wiring([info("input_ids", [1, "s"], TensorProto.INT64), info("past_key_values.0.key", [1, 2, "p", 16])],
                       [info("logits", [1, "s", 64]), info("present.0.key", [1, 2, "t", 16])])
    assert [(p.input, p.output, p.kv_cache) for p in kv.pairs] == [("past_key_values.0.key", "present.0.key", True)]
    with pytest.raises(UsageError, match="state input 'h0' is not wired"):
        detect_wiring([info("x", [1]), info("h0", [1, 8])], [info("y", [1]), info("hn", [1, 8], TensorProto.FLOAT16)])


def test_explicit_pairs_and_their_errors():
    wiring = detect_wiring([info("x", [1]), info("mem", [1, 8])], [info("y", [1]), info("carry", [1, 8])],
                           parse_pairs(["mem=carry"]))
    assert [(p.input, p.output, p.source) for p in wiring.pairs] == [("mem", "carry", "explicit")]
    with pytest.raises(UsageError, match="has no output 'nope'"):
        detect_wiring([info("mem", [1, 8])], [info("carry", [1, 8])], [("mem", "nope")])
    with pytest.raises(UsageError, match="expected IN=OUT"):
        parse_pairs(["mem"])


def test_unwired_state_input_is_an_error_naming_it(tmp_path):
    """A model whose state output has an unguessable name: the error names the input and the outputs."""
    nodes = [helper.make_node("Add", ["x", "state"], ["acc"], name="add"),
             helper.make_node("Identity", ["acc"], ["y"], name="out")]
    path = save(make_model(nodes, [vi("x", [1, 4]), vi("state", [1, 4])], [vi("y", [1, 4]), vi("acc", [1, 4])]),
                tmp_path / "m.onnx")
    with pytest.raises(UsageError) as error:
        open_stepped(path)
    assert error.value.message.endswith("state input 'state' is not wired to any output")
    assert error.value.hint == "give it with --state state=OUTPUT (outputs: y, acc)"
    assert [(p.input, p.output) for p in open_stepped(path, [("state", "acc")]).wiring.pairs] == [("state", "acc")]


def test_initial_state_sizes_symbols_from_the_step_inputs_and_kv_caches_start_empty(tmp_path):
    inputs = [info("x", ["batch", 4]), info("h0", [1, "batch", 8]), info("past.0", ["batch", 2, "past", 16]),
              info("c0", [1, "other", 8])]
    outputs = [info("y", ["batch", 4]), info("hn", [1, "batch", 8]), info("present.0", ["batch", 2, "total", 16]),
               info("cn", [1, "other", 8])]
    wiring = detect_wiring(inputs, outputs)
    state, notes = initial_state(wiring, inputs, {"x": np.ones((3, 4), np.float32)})
    assert {k: v.shape for k, v in state.items()} == {"h0": (1, 3, 8), "past.0": (3, 2, 0, 16), "c0": (1, 1, 8)}
    assert not any(v.any() for v in state.values())
    assert notes == ["state 'c0': dim 'other' is not fixed by the step inputs; 1 assumed"]
    np.savez(tmp_path / "init.npz", h0=np.full((1, 3, 8), 0.5, np.float32))
    state, _ = initial_state(wiring, inputs, {"x": np.ones((3, 4), np.float32)}, tmp_path / "init.npz")
    assert float(state["h0"].sum()) == 12.0 and state["c0"].shape == (1, 1, 8)
    np.savez(tmp_path / "bad.npz", hx=np.zeros(3, np.float32))
    with pytest.raises(Exception, match="'hx' is not a state input"):
        initial_state(wiring, inputs, {"x": np.ones((3, 4), np.float32)}, tmp_path / "bad.npz")


def test_wiring_of_the_exported_models(rnn_models, gpt_models):
    gru = open_stepped(rnn_models["gru"]).wiring
    assert [(p.input, p.output) for p in gru.pairs] == [("h0", "hn")] and gru.step_inputs == ("x",)
    lstm = open_stepped(rnn_models["lstm_fp16"]).wiring
    assert [(p.input, p.output, p.dtype) for p in lstm.pairs] == [("h0", "hn", "float16"), ("c0", "cn", "float16")]
    gpt = load_model(gpt_models["fp32"])
    wiring = detect_wiring(gpt.inputs, gpt.outputs)
    assert [(p.input, p.output) for p in wiring.pairs] == [
        (f"past_key_values.{i}.{k}", f"present.{i}.{k}") for i in range(2) for k in ("key", "value")]
    assert wiring.step_inputs == ("input_ids", "attention_mask") and wiring.step_outputs == ("logits",)
