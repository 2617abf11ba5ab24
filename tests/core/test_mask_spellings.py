"""The mask rule for attention however it is spelled (issue 42): the ONNX Attention function's row guard
and -inf sentinel, a -inf Pad, the caller's mask as an input, masked scores as an output, fused
attention ops. Each fixture (tests/core/attention_spellings.py) holds only intended -inf; the counts
are hand-computed. Exit codes from real processes."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest

from inspector_cli.core.graph import load_model
from inspector_cli.core.masks import find_masks
from inspector_cli.core.maskops import ATTENTION_MASK_INPUTS

from ..fixtures.helpers import save_npz
from ..fixtures.subproc import assert_status, run_mi
from .attention_spellings import (ALLOWED, SCORES, exported_scores_model, fused_inputs, fused_model,
                                  input_mask_model, padded_mask_model, row_guard_model, sentinel_model,
                                  triu_mask_model)


def _run(tmp_path: Path, command: str, model: Path, sample: Dict[str, np.ndarray], status: int,
         *extra: Any) -> Dict[str, Any]:
    data = save_npz(tmp_path / f"{command}-data", [sample])
    out = tmp_path / f"{command}.json"
    args = ["-q", command, model, "-i", data, "--json", out, *extra]
    if command == "probe":
        args.append("--no-history")
    assert_status(run_mi(args, cwd=tmp_path), status)
    return json.loads(out.read_text())["results"]


def _tensors(doc: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    return {t["name"]: t for t in doc["tensors"]}


def _rules(doc: Dict[str, Any]) -> List[Tuple[str, str]]:
    return [(f["rule"], f["severity"]) for f in doc["findings"] if f["severity"] != "warning"]


def test_the_attention_functions_row_guard_makes_its_nan_rows_intended(tmp_path: Path) -> None:
    # fails before issue 42: probe exit 1 (MI828 error on p, MI821 on p_out, row_max and neginf_like)
    model = row_guard_model(tmp_path / "guard.onnx")
    analysis = find_masks(load_model(model))
    assert len(analysis.masks) == 1 and analysis.masks[0].ends == ("softmax", "row_all_masked")
    assert analysis.guards == {"softmax": "row_guard"}
    assert analysis.rows_of == {"p": "softmax", "p_out": "softmax"}
    doc = _run(tmp_path, "probe", model, {"scores": SCORES, "allowed": ALLOWED}, 0)
    t = _tensors(doc)
    # bias: [[0, 0, -inf], [-inf, -inf, -inf]]; row 1 of p is 0/0 in its 3 columns; y replaces it by 0
    assert (t["bias"]["inf"], t["bias"]["masked"], t["s"]["masked"]) == (0, 4, 4)
    assert (t["p"]["nan"], t["p"]["masked_rows"], t["p_out"]["nan"], t["p_out"]["masked_rows"]) == (3, 1, 3, 1)
    assert (t["row_max"]["inf"], t["row_max"]["masked"], t["neginf_like"]["masked"]) == (0, 1, 1)
    assert (t["y"]["nan"], t["y"]["max"], t["y"]["min"]) == (0, 0.75, 0.0)  # row 0: softmax([0, ln 3]) = [.25, .75]
    assert _rules(doc) == [("MI829", "info"), ("MI828", "info"), ("MI828", "info")]
    rows = [f for f in doc["findings"] if f["rule"] == "MI828"]
    assert rows[1]["message"] == (
        "tensor 'p_out' holds 3 NaN: 1 row(s) of Softmax 'softmax' had every input masked (-Inf), and Softmax of "
        "a row with no position left is 0/0 = NaN; Where 'row_guard' replaces those rows (the model's guard for a "
        "query with nothing to attend to): intended")
    nb = _run(tmp_path, "nan-bisect", model, {"scores": SCORES, "allowed": ALLOWED}, 0)
    assert nb["static"] == [] and nb["nonfinite"] == 0 and _rules(nb) == [("MI907", "info")]


def test_a_guard_excuses_the_masked_rows_only(tmp_path: Path) -> None:
    # a NaN score in an open position: row 0 of p is NaN as well, which no guard replaces
    scores = SCORES.copy()
    scores[0, 0, 0, 0] = np.nan
    model = row_guard_model(tmp_path / "guard.onnx")
    doc = _run(tmp_path, "probe", model, {"scores": scores, "allowed": ALLOWED}, 1)
    t = _tensors(doc)
    assert (t["p"]["nan"], t["p"]["masked_rows"]) == (6, 0)
    assert ("MI821", "p") in [(f["rule"], f["tensor"]) for f in doc["findings"]]
    nb = _run(tmp_path, "nan-bisect", model, {"scores": scores, "allowed": ALLOWED}, 1)
    origin = nb["records"][0]["origin"]
    assert (origin["node"], origin["op_type"]) == ("scores", "(input)")
    assert nb["records"][0]["outputs"] == {"y": {"nan": 3, "inf": 0}}


def test_a_minus_inf_only_compared_is_no_weight_defect(tmp_path: Path) -> None:
    # fails before issue 42: nan-bisect exit 1 "weight 'neginf' holds 0 NaN and 1 Inf" (MI901), probe exit 1
    # (MI821 on neginf_like): test_attention_4d_expanded and 55 more of the backend's expanded attention cases
    model = sentinel_model(tmp_path / "sentinel.onnx")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    nb = _run(tmp_path, "nan-bisect", model, {"x": x}, 0)
    assert nb["static"] == [] and _rules(nb) == [("MI907", "info")]
    assert nb["findings"][0]["message"].startswith("mask of -inf from neginf through neginf_like to row_all_masked")
    t = _tensors(_run(tmp_path, "probe", model, {"x": x}, 0))
    assert (t["neginf_like"]["inf"], t["neginf_like"]["masked"], t["y"]["max"]) == (0, 1, 5.0)


def test_a_bias_padded_with_minus_inf_is_a_mask(tmp_path: Path) -> None:
    # fails before issue 42: Pad ended the trace: probe exit 1 (MI821 on bias_short, bias, s), nan-bisect exit 1 (MI901)
    model = padded_mask_model(tmp_path / "pad.onnx")
    allowed = np.array([[True, False], [True, True]])
    sample = {"scores": SCORES, "allowed": allowed}
    t = _tensors(_run(tmp_path, "probe", model, sample, 0))
    # bias_short [[0, -inf], [0, 0]] padded to [[0, -inf, -inf], [0, 0, -inf]]
    assert (t["bias_short"]["masked"], t["bias"]["masked"], t["s"]["masked"], t["p"]["nan"]) == (1, 3, 3, 0)
    assert t["p"]["max"] == 1.0  # row 0 keeps key 0 only
    assert _run(tmp_path, "nan-bisect", model, sample, 0)["static"] == []


def test_a_triangle_of_a_minus_inf_constant_of_shape_is_a_mask(tmp_path: Path) -> None:
    # fails before issue 42: ConstantOfShape was no fill and Trilu no move: probe exit 1 (MI821 on full, m, s)
    model = triu_mask_model(tmp_path / "triu.onnx")
    scores = np.random.default_rng(0).standard_normal((1, 1, 5, 5)).astype(np.float32)
    t = _tensors(_run(tmp_path, "probe", model, {"scores": scores}, 0))
    # full: 25 -inf; m keeps the 10 above the diagonal; s holds them too
    assert (t["full"]["masked"], t["m"]["masked"], t["s"]["masked"], t["s"]["inf"]) == (25, 10, 10, 0)
    assert t["p"]["nan"] == 0


def test_the_callers_mask_given_as_an_input_is_a_mask(tmp_path: Path) -> None:
    # fails before issue 42: probe exit 1, MI821 "tensor 'bias' holds 0 NaN and 1 Inf" (test_attention_4d_softcap_neginf_mask_expanded)
    model = input_mask_model(tmp_path / "input.onnx")
    analysis = find_masks(load_model(model))
    assert [m.inputs for m in analysis.masks] == [("attn_mask",)] and analysis.pure == {"attn_mask", "bias"}
    rng = np.random.default_rng(0)
    sample = {"q": rng.standard_normal((1, 1, 2, 4)).astype(np.float32),
              "k": rng.standard_normal((1, 1, 2, 4)).astype(np.float32),
              "attn_mask": np.array([[0.0, -np.inf], [0.0, 0.0]], np.float32)}
    doc = _run(tmp_path, "probe", model, sample, 0)
    t = _tensors(doc)
    assert (t["bias"]["inf"], t["bias"]["masked"], t["s"]["masked"]) == (0, 1, 1)
    assert doc["findings"][0]["message"] == ("mask of -inf from input attn_mask through bias_copy, bias_add to softmax: "
                                             "2 masked value(s) in 2 tensor(s), not counted as Inf")


def test_masked_scores_given_out_as_an_output_hold_intended_values(tmp_path: Path) -> None:
    # fails before issue 42: nan-bisect exit 1 "scores_out (Identity) produced 3 Inf from finite inputs", probe
    # exit 1 (MI821 on scores_out): test_attention_4d_with_past_and_present_qk_matmul_bias_3d_mask_causal_expanded
    model = exported_scores_model(tmp_path / "scores.onnx")
    allowed = np.array([[True, True, False], [True, False, False]])
    sample = {"scores": SCORES, "allowed": allowed}
    assert _tensors(_run(tmp_path, "probe", model, sample, 0))["scores_out"]["masked"] == 3
    jsonl = tmp_path / "nb.jsonl"
    nb = _run(tmp_path, "nan-bisect", model, sample, 0, "--jsonl", jsonl)
    assert nb["intended"] == 1 and nb["nonfinite"] == 0
    record = json.loads(jsonl.read_text().splitlines()[0])
    assert record["status"] == "clean" and record["intended"] == {"scores_out": {"nan": 0, "inf": 3}}


@pytest.mark.parametrize("op", ["Attention", "MultiHeadAttention"])
def test_a_mask_fed_to_a_fused_attention_op_ends_there(tmp_path: Path, op: str) -> None:
    # fails before issue 42: probe exit 1 (MI821 "tensor 'bias' holds 0 NaN and 6 Inf"), nan-bisect exit 1 (MI901 neginf)
    model = fused_model(tmp_path / f"{op}.onnx", op)
    doc = _run(tmp_path, "probe", model, fused_inputs(op), 0)
    assert _tensors(doc)["bias"]["masked"] == 6  # the 6 keys above the diagonal of a 4 x 4 causal mask
    assert doc["findings"][0]["message"] == ("mask of -inf from neginf through bias_where to attention: "
                                             "6 masked value(s) in 1 tensor(s), not counted as Inf")
    nb = _run(tmp_path, "nan-bisect", model, fused_inputs(op), 0)
    assert nb["static"] == [] and _rules(nb) == [("MI907", "info")]


def test_the_fused_ops_mask_inputs_are_the_ones_onnxruntime_documents() -> None:
    from onnxruntime.capi import onnxruntime_pybind11_state as ort_c

    latest: Dict[Tuple[str, str], Any] = {}
    for schema in ort_c.get_all_operator_schema():
        key = (schema.domain, schema.name)
        if key in ATTENTION_MASK_INPUTS and (key not in latest or schema.since_version > latest[key].since_version):
            latest[key] = schema
    assert set(latest) == set(ATTENTION_MASK_INPUTS)
    for key, positions in ATTENTION_MASK_INPUTS.items():
        inputs = latest[key].inputs
        names = [inputs[i].name for i in positions]
        assert all(n in ("attn_mask", "attention_bias", "mask") for n in names), (key, names)
        float_types = [c.allowed_type_strs for c in latest[key].type_constraints
                       if c.type_param_str == inputs[positions[0]].typeStr]
        assert float_types and any("float" in t for t in float_types[0]), (key, float_types)
