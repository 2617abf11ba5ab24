"""Sequence mode end to end on the command line: `mi compare --sequence/--decode`,
`mi nan-bisect --sequence`, `mi probe --sequence`, the printed wiring and its errors, resume.

Expected steps and values come from plain onnxruntime loops in tests/sequence/models.py (or numpy's
fp16 arithmetic), independent of mi's loop.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import helper

from tests.fixtures.helpers import invoke, make_model, save, vi

from .models import (
    gpt2_greedy_with_cache,
    gpt2_greedy_without_cache,
    reference_loop,
)
from .test_nan import first_overflow_step
from .test_rnn import PAIRS, cosine, xs, zeros


def first_below(models, kind, variant, threshold=0.99):
    ref_a = reference_loop(models[kind], xs(models), zeros(kind), PAIRS[kind])
    ref_b = reference_loop(models[f"{kind}_{variant}"], xs(models), zeros(kind), PAIRS[kind])
    return next(t for t, (a, b) in enumerate(zip(ref_a, ref_b)) if cosine(a["logits"], b["logits"]) < threshold)


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_compare_sequence_names_the_step_and_says_born_in_the_state(rnn_models, kind, tmp_path):
    first = first_below(rnn_models, kind, "recurrence")
    out = invoke(["compare", rnn_models[kind], rnn_models[f"{kind}_recurrence"], "--sequence", rnn_models["steps"],
                  "--min-cosine", "0.99", "--json", tmp_path / "r.json", "--html", tmp_path / "r.html"], exit_code=1)
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["kind"] == "sequence"
    results = doc["results"]
    assert results["steps"] == 60 and results["first_gate_failure"] == first
    assert results["divergence"]["step"] == first and results["divergence"]["born"] == "state"
    assert [(w["input"], w["output"], w["source"]) for w in results["wiring"]] == \
        [(i, o, "auto") for i, o in PAIRS[kind]]
    assert f"first gate failure at step {first}" in out.stdout and "born in the state" in out.stdout
    # the wiring is printed on stderr before the run (A's in full, B's as "the same")
    assert f"state wiring of model A ({rnn_models[kind]}):\n  hn -> h0  (float32 [1, 1, 16], auto)" in out.stderr
    assert f"state wiring of model B ({rnn_models[kind + '_recurrence']}):\n  the same as model A" in out.stderr
    assert "born in the state" in (tmp_path / "r.html").read_text()
    quiet = invoke(["-q", "compare", rnn_models[kind], rnn_models[f"{kind}_recurrence"], "--sequence",
                    rnn_models["steps"], "--min-cosine", "0.99"], exit_code=1)
    assert "state wiring" not in quiet.stderr


@pytest.mark.parametrize("variant", ["int8", "fp16"])
def test_int8_and_fp16_with_a_recurrent_scale_error_are_born_in_the_state(rnn_models, variant, tmp_path):
    """The deployed form (int8 quantize_dynamic, fp16 I/O) of the LSTM whose recurrent weights are x1.3."""
    from .models import fp16_io, quantize_int8

    build = quantize_int8 if variant == "int8" else fp16_io
    broken = build(rnn_models["lstm_recurrence"], tmp_path / f"lstm_r_{variant}.onnx")
    ref_a = reference_loop(rnn_models["lstm"], xs(rnn_models), zeros("lstm"), PAIRS["lstm"])
    ref_b = reference_loop(broken, xs(rnn_models), zeros("lstm"), PAIRS["lstm"])
    first = next(t for t, (a, b) in enumerate(zip(ref_a, ref_b)) if cosine(a["logits"], b["logits"]) < 0.99)
    out = invoke(["compare", rnn_models["lstm"], broken, "--sequence", rnn_models["steps"], "--min-cosine", "0.99",
                  "--json", tmp_path / "r.json"], exit_code=1)
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["results"]["first_gate_failure"] == first and doc["results"]["divergence"]["born"] == "state"
    assert doc["verdict"]["summary"].endswith(f"first gate failure at step {first}; decision of 'logits' first "
                                              f"differs at step {first}; born in the state")
    assert f"first gate failure at step {first}" in out.stdout


def test_fp32_vs_int8_and_fp16_pass_a_loose_gate(rnn_models, tmp_path):
    for variant in ("int8", "fp16"):
        invoke(["compare", rnn_models["gru"], rnn_models[f"gru_{variant}"], "--sequence", rnn_models["steps"],
                "--min-cosine", "0.99", "--json", tmp_path / f"{variant}.json"])
        results = json.loads((tmp_path / f"{variant}.json").read_text())["results"]
        assert results["first_gate_failure"] is None and results["steps"] == 60


def test_layers_at_the_diverging_step(rnn_models, tmp_path):
    """--layers: the first diverging step's layers, both models fed the step's input and A's state;
    the logits row is then exactly the replay of B on A's state."""
    first = first_below(rnn_models, "lstm", "recurrence")
    invoke(["compare", rnn_models["lstm"], rnn_models["lstm_recurrence"], "--sequence", rnn_models["steps"],
            "--min-cosine", "0.99", "--layers", "all", "--json", tmp_path / "r.json", "--repro", tmp_path / "rep"],
           exit_code=1)
    results = json.loads((tmp_path / "r.json").read_text())["results"]
    layers = results["layers"]
    assert layers["step"] == first
    rows = {row["tensor"]: row for row in layers["layers"]}
    assert {"logits", "hn", "cn"} <= set(rows) and rows["logits"]["op"] == "Gemm"
    assert rows["logits"]["cosine"] == pytest.approx(results["divergence"]["replay"]["cosine"], abs=1e-6)
    assert layers["first_divergence"] is None  # every layer of B's step stays above 0.99: the state carried it
    with np.load(layers["sample"]) as sample:  # kept with --repro: the step's input and A's state
        assert sorted(sample.files) == ["c0", "h0", "x"]
        np.testing.assert_array_equal(sample["x"], xs(rnn_models)[first])


def test_decode_mode_token_agreement_and_first_differing_token(gpt_models, tmp_path):
    prompt = [1, 2, 3]
    ref_a, _ = gpt2_greedy_without_cache(gpt_models["fp32"], prompt, 40)
    ref_b, _ = gpt2_greedy_with_cache(gpt_models["int8"], prompt, 40)  # dynamic int8: the cached loop (test_decode)
    first = next(i for i, (x, y) in enumerate(zip(ref_a, ref_b)) if x != y)
    (tmp_path / "ids.txt").write_text("1, 2 3\n")
    out = invoke(["compare", gpt_models["fp32"], gpt_models["int8"], "--decode", "--prompt", tmp_path / "ids.txt",
                  "--steps", "40", "--json", tmp_path / "d.json", "--jsonl", tmp_path / "d.jsonl"])
    decode = json.loads((tmp_path / "d.json").read_text())["results"]["decode"]
    assert decode["tokens_a"] == ref_a and decode["tokens_b"] == ref_b and decode["first_difference"] == first
    assert decode["agreement"] == pytest.approx(sum(x == y for x, y in zip(ref_a, ref_b)) / 40)
    assert f"first differing token at step {first}" in out.stdout
    assert "present.0.key -> past_key_values.0.key" in out.stderr and "KV cache" in out.stderr
    assert len((tmp_path / "d.jsonl").read_text().splitlines()) == 40
    np.save(tmp_path / "ids.npy", np.array(prompt, np.int64))
    invoke(["compare", gpt_models["fp32"], gpt_models["int8"], "--decode", "--prompt", tmp_path / "ids.npy",
            "--steps", "5", "--teacher-forced", "--json", tmp_path / "t.json"])
    teacher = json.loads((tmp_path / "t.json").read_text())["results"]["decode"]
    assert teacher["mode"] == "teacher-forced" and teacher["tokens_a"] == ref_a[:5]


def test_decode_usage_errors(gpt_models, tmp_path):
    out = invoke(["compare", gpt_models["fp32"], gpt_models["int8"], "--decode"], exit_code=2)
    assert "Error: --decode needs --prompt FILE (token ids)" in out.stderr
    (tmp_path / "words.txt").write_text("hello world\n")
    out = invoke(["compare", gpt_models["fp32"], gpt_models["int8"], "--decode", "--prompt", tmp_path / "words.txt"],
                 exit_code=3)
    assert "words.txt: not token ids" in out.stderr and "mi has no tokenizer" in out.stderr


def test_decode_several_prompts_from_a_txt(gpt_models, tmp_path):
    (tmp_path / "two.txt").write_text("1 2 3\n9 4\n")
    out = invoke(["compare", gpt_models["fp32"], gpt_models["int8"], "--decode", "--prompt", tmp_path / "two.txt",
                  "--steps", "4", "--json", tmp_path / "two.json"])
    results = json.loads((tmp_path / "two.json").read_text())["results"]
    assert [(r["prompt"], r["prompt_length"], r["steps"]) for r in results["decode_runs"]] == [(0, 3, 4), (1, 2, 4)]
    assert results["steps"] == 8 and results["source"]["prompts"] == 2
    assert "decode, per prompt" in out.stdout and "of 2 prompts" in out.stdout


def test_nan_bisect_sequence_names_the_step_and_the_node(accumulators):
    fp16, _, folder = accumulators
    step, carried = first_overflow_step()
    out = invoke(["nan-bisect", fp16, "--sequence", folder / "ones16.npz", "--steps", "1000", "--repro",
                  folder / "rep", "--json", folder / "nb.json"], exit_code=1)
    doc = json.loads((folder / "nb.json").read_text())
    assert doc["kind"] == "nan-bisect" and doc["inputs"]["sequence_step"] == step == 65
    assert doc["inputs"]["nonfinite_tensors"] == ["acc_out"] and doc["inputs"]["wiring"] == ["acc=acc_out"]
    assert "first born at accumulate (Add)" in doc["verdict"]["summary"]
    assert f"the first non-finite values appear at step {step} (acc_out (fed-back state))" in out.stdout
    with np.load(folder / "rep" / f"step_{step:06d}_A" / "inputs.npz") as sample:
        assert float(sample["acc"][0, 0]) == carried
    assert (folder / "rep" / "accumulate").is_dir()  # nan-bisect's own one-node repro beside it


def test_nan_bisect_sequence_without_non_finite_steps_passes(accumulators):
    _, fp32, folder = accumulators
    out = invoke(["nan-bisect", fp32, "--sequence", folder / "ones32.npz", "--json", folder / "ok.json"])
    results = json.loads((folder / "ok.json").read_text())["results"]
    assert results["mode"] == "scan" and results["steps"] == 100 and results["nonfinite"] is None
    assert out.stdout.strip().endswith("PASS: 100 step(s); no gates set")


def unwired(tmp_path):
    nodes = [helper.make_node("Add", ["x", "state"], ["acc"], name="add"),
             helper.make_node("Identity", ["acc"], ["y"], name="out")]
    path = save(make_model(nodes, [vi("x", [1, 4]), vi("state", [1, 4])], [vi("y", [1, 4]), vi("acc", [1, 4])]),
                tmp_path / "m.onnx")
    np.savez(tmp_path / "xs.npz", x=np.ones((5, 1, 4), np.float32))
    return path


def test_unwired_state_is_a_usage_error_naming_it(tmp_path):
    path = unwired(tmp_path)
    out = invoke(["compare", path, path, "--sequence", tmp_path / "xs.npz"], exit_code=2)
    assert f"Error: model A ({path}): state input 'state' is not wired to any output" in out.stderr
    assert "--state state=OUTPUT (outputs: y, acc)" in out.stderr and "Traceback" not in out.stderr
    out = invoke(["nan-bisect", path, "--sequence", tmp_path / "xs.npz"], exit_code=2)
    assert "state input 'state' is not wired" in out.stderr
    invoke(["compare", path, path, "--sequence", tmp_path / "xs.npz", "--state", "state=acc"])
    # the YAML form: a map in the compare section, checked by `mi config check`
    (tmp_path / "run.yaml").write_text("version: 1\ncompare:\n  state:\n    state: acc\n")
    invoke(["config", "check", tmp_path / "run.yaml"])
    invoke(["-c", tmp_path / "run.yaml", "compare", path, path, "--sequence", tmp_path / "xs.npz",
            "--json", tmp_path / "y.json"])
    wiring = json.loads((tmp_path / "y.json").read_text())["results"]["wiring"]
    assert [(w["input"], w["output"], w["source"]) for w in wiring] == [("state", "acc", "explicit")]


def test_jsonl_resume_equals_an_uninterrupted_run(rnn_models, tmp_path):
    """250 steps in one .npz with a time axis; a checkpoint after 100 steps: the resumed journal is
    byte for byte the uninterrupted one."""
    rng = np.random.default_rng(5)
    np.savez(tmp_path / "long.npz", x=rng.standard_normal((250, 1, 1, 8)).astype(np.float32))
    a, b = rnn_models["lstm"], rnn_models["lstm_recurrence"]
    common = ["compare", a, b, "--sequence", tmp_path / "long.npz", "--min-cosine", "0.99"]
    invoke(common + ["--jsonl", tmp_path / "full.jsonl", "--json", tmp_path / "full.json"], exit_code=1)
    invoke(common + ["--jsonl", tmp_path / "part.jsonl", "--steps", "150"], exit_code=1)
    invoke(common + ["--jsonl", tmp_path / "part.jsonl", "--resume", "--json", tmp_path / "part.json"], exit_code=1)
    assert (tmp_path / "part.jsonl").read_bytes() == (tmp_path / "full.jsonl").read_bytes()
    full = json.loads((tmp_path / "full.json").read_text())["results"]
    part = json.loads((tmp_path / "part.json").read_text())["results"]
    # steps are reduced in blocks of 64: the checkpoint due at step 99 is written at the block's end (127)
    assert part["resumed_steps"] == 128 and part["steps"] == 250
    assert part["outputs"] == full["outputs"] and part["divergence"] == full["divergence"]
    out = invoke(["compare", a, b, "--sequence", tmp_path / "long.npz", "--resume"], exit_code=2)
    assert "--resume needs --jsonl PATH" in out.stderr


def test_probe_sequence_per_step_and_a_trigger_stops_at_the_step(rnn_models, tmp_path):
    ref = reference_loop(rnn_models["lstm"], xs(rnn_models), zeros("lstm"), PAIRS["lstm"])
    first = next(t for t, r in enumerate(ref) if max(np.abs(r["hn"]).max(), np.abs(r["cn"]).max()) > 0.5)
    invoke(["probe", rnn_models["lstm"], "--sequence", rnn_models["steps"], "--select", "op:LSTM", "--per-step",
            "--break-on", "absmax>0.5", "--no-history", "--json", tmp_path / "p.json"], exit_code=1)
    results = json.loads((tmp_path / "p.json").read_text())["results"]
    assert results["trigger"]["sample_index"] == first and results["samples"] == first + 1
    assert results["trigger"]["sample"] == f"step_{first:06d}"  # no temporary files: the step is the sample
    rows = [r for r in results["per_sample"] if r["tensor"] == "cn"]
    assert [r["sample"] for r in rows] == [f"step_{t:06d}" for t in range(first + 1)]
    assert rows[-1]["max"] == pytest.approx(float(ref[first]["cn"].max()), abs=1e-6)
    # over all steps, no trigger: the statistics of the 60 steps
    invoke(["probe", rnn_models["lstm"], "--sequence", rnn_models["steps"], "--select", "op:LSTM", "--no-history",
            "--json", tmp_path / "all.json"])
    tensors = {t["name"]: t for t in json.loads((tmp_path / "all.json").read_text())["results"]["tensors"]}
    assert tensors["cn"]["max"] == pytest.approx(max(float(r["cn"].max()) for r in ref), abs=1e-6)
    assert tensors["cn"]["samples"] == 60


def test_probe_sequence_one_pass_survives_chunks_and_restarts(rnn_models, tmp_path):
    """A capture budget of a few bytes puts every tensor in its own chunk: each chunk walks the steps
    again from the block's start, restoring the state saved there, so the statistics equal the
    reference loop's; a trigger's --dump holds the step's own inputs (step input and carried state)."""
    ref = reference_loop(rnn_models["lstm"], xs(rnn_models), zeros("lstm"), PAIRS["lstm"])
    invoke(["probe", rnn_models["lstm"], "--sequence", rnn_models["steps"], "--select", "op:LSTM", "--no-history",
            "--capture-budget", "64", "--json", tmp_path / "chunked.json"])
    results = json.loads((tmp_path / "chunked.json").read_text())["results"]
    assert len(results["capture"]["chunk_sizes"]) > 1 and results["samples"] == 60
    tensors = {t["name"]: t for t in results["tensors"]}
    assert tensors["cn"]["max"] == pytest.approx(max(float(r["cn"].max()) for r in ref), abs=1e-6)
    assert tensors["hn"]["min"] == pytest.approx(min(float(r["hn"].min()) for r in ref), abs=1e-6)
    first = next(t for t, r in enumerate(ref) if np.abs(r["cn"]).max() > 1.0)
    invoke(["probe", rnn_models["lstm"], "--sequence", rnn_models["steps"], "--select", "op:LSTM", "--no-history",
            "--capture-budget", "64", "--break-on", "absmax>1.0", "--dump", tmp_path / "dump",
            "--json", tmp_path / "hit.json"], exit_code=1)
    hit = json.loads((tmp_path / "hit.json").read_text())["results"]
    assert hit["trigger"]["sample_index"] == first and hit["trigger"]["sample"] == f"step_{first:06d}"
    with np.load(tmp_path / "dump" / f"step_{first:06d}.inputs.npz") as inputs:
        assert sorted(inputs.files) == ["c0", "h0", "x"]
        np.testing.assert_array_equal(inputs["h0"], ref[first - 1]["hn"])  # the state carried into the step
        np.testing.assert_array_equal(inputs["c0"], ref[first - 1]["cn"])
