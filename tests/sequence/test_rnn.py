"""GRU/LSTM steps exported from torch: fp32 vs int8 and fp16, and an error that only the state carries.

Expected values come from a plain onnxruntime loop written in the test (tests/sequence/models.py:
reference_loop), independent of mi's loop, wiring and metrics.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from inspector_cli.diff.gates import parse_gate
from inspector_cli.sequence import SequenceConfig, run_sequence

from .models import HIDDEN, reference_loop

PAIRS = {"gru": [("h0", "hn")], "lstm": [("h0", "hn"), ("c0", "cn")]}


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(a @ b / np.sqrt((a @ a) * (b @ b)))


def xs(models):
    return [np.load(models["steps"] / f"step_{t:04d}.npz")["x"] for t in range(60)]


def zeros(kind):
    return {name: np.zeros((1, 1, HIDDEN), np.float32) for name, _ in PAIRS[kind]}


@pytest.mark.parametrize("kind", ["gru", "lstm"])
@pytest.mark.parametrize("variant", ["int8", "fp16"])
def test_per_step_metrics_match_a_plain_loop(rnn_models, kind, variant):
    a_path, b_path = rnn_models[kind], rnn_models[f"{kind}_{variant}"]
    result = run_sequence(a_path, b_path, rnn_models["steps"], SequenceConfig(gates=(parse_gate("min-cosine", "0.99"),)))
    ref_a = reference_loop(a_path, xs(rnn_models), zeros(kind), PAIRS[kind])
    ref_b = reference_loop(b_path, xs(rnn_models), zeros(kind), PAIRS[kind])
    per_step = [cosine(a["logits"], b["logits"]) for a, b in zip(ref_a, ref_b)]
    logits = result.outputs[0]
    assert result.steps == 60 and result.mode == "compare" and logits.tensor == "logits"
    assert logits.worst["cosine"] == pytest.approx(min(per_step), abs=1e-9)
    assert logits.worst_step["cosine"] == int(np.argmin(per_step))
    assert logits.mean["cosine"] == pytest.approx(float(np.mean(per_step)), abs=1e-9)
    drift = [cosine(a["hn"], b["hn"]) for a, b in zip(ref_a, ref_b)]
    hn = next(s for s in result.states if s.tensor == "hn")
    assert hn.worst["cosine"] == pytest.approx(min(drift), abs=1e-9)
    decisions = [int(a["logits"].argmax()) == int(b["logits"].argmax()) for a, b in zip(ref_a, ref_b)]
    assert result.decision_agreement == pytest.approx(sum(decisions) / 60)
    assert result.passed and result.first_gate_failure is None and result.nonfinite is None


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_scaled_recurrence_diverges_through_the_state(rnn_models, kind):
    """R x factor: each step alone stays close (B fed A's state agrees), the carried state drifts."""
    a_path, b_path = rnn_models[kind], rnn_models[f"{kind}_recurrence"]
    result = run_sequence(a_path, b_path, rnn_models["steps"], SequenceConfig(gates=(parse_gate("min-cosine", "0.99"),)))
    ref_a = reference_loop(a_path, xs(rnn_models), zeros(kind), PAIRS[kind])
    ref_b = reference_loop(b_path, xs(rnn_models), zeros(kind), PAIRS[kind])
    per_step = [cosine(a["logits"], b["logits"]) for a, b in zip(ref_a, ref_b)]
    first = next(t for t, c in enumerate(per_step) if c < 0.99)
    assert result.first_gate_failure == first and not result.passed
    divergence = result.divergence
    assert divergence.step == first and divergence.trigger == "gate" and divergence.born == "state"
    # The replay by hand: B's step fed A's state (the outputs of A's previous step) stays above the gate.
    state_a = {i: ref_a[first - 1][o] for i, o in PAIRS[kind]}
    replay = reference_loop(b_path, [xs(rnn_models)[first]], state_a, PAIRS[kind])[0]
    assert divergence.replay["cosine"] == pytest.approx(cosine(ref_a[first]["logits"], replay["logits"]), abs=1e-9)
    assert divergence.replay["cosine"] >= 0.99 and divergence.replay_agrees is True
    assert divergence.state_cosine == pytest.approx(
        min(cosine(ref_a[first - 1][o], ref_b[first - 1][o]) for _, o in PAIRS[kind]), abs=1e-9)
    assert result.summary().startswith(f"FAIL: 60 step(s); first gate failure at step {first}")
    assert "born in the state" in result.summary()
    gate = result.gates[0]
    assert gate.failed_samples == sum(c < 0.99 for c in per_step) and gate.total_samples == 60


def test_scaled_head_diverges_in_the_step(rnn_models):
    """The output head x1.5: wrong from the first step whatever the state."""
    result = run_sequence(rnn_models["gru"], rnn_models["gru_head"], rnn_models["steps"],
                          SequenceConfig(gates=(parse_gate("max-abs", "0.01"),)))
    assert result.divergence.step == 0 and result.divergence.born == "step"
    assert result.divergence.replay_agrees is False
    assert result.states[0].worst["cosine"] == 1.0  # the state never differs


def test_journal_resume_gives_the_same_result_and_lines(rnn_models, tmp_path):
    gates = (parse_gate("min-cosine", "0.99"),)
    a, b, steps = rnn_models["lstm"], rnn_models["lstm_recurrence"], rnn_models["steps"]
    full = run_sequence(a, b, steps, SequenceConfig(gates=gates, journal=tmp_path / "full.jsonl", checkpoint_every=7))
    # An interrupted run: 30 steps, checkpoints after steps 6, 13, 20, 27; lines 28-29 are redone.
    part = tmp_path / "part.jsonl"
    run_sequence(a, b, steps, SequenceConfig(gates=gates, journal=part, checkpoint_every=7, steps=30))
    resumed = run_sequence(a, b, steps, SequenceConfig(gates=gates, journal=part, checkpoint_every=7, resume=True))
    assert resumed.resumed_steps == 28 and resumed.steps == 60
    assert part.read_bytes() == (tmp_path / "full.jsonl").read_bytes()
    assert len(part.read_text().splitlines()) == 60 and json.loads(part.read_text().splitlines()[5])["step"] == 5
    assert resumed.outputs == full.outputs and resumed.states == full.states and resumed.gates == full.gates
    assert resumed.divergence == full.divergence and resumed.timeline == full.timeline


def test_fp16_state_crossing_into_b_is_cast(rnn_models):
    """A fp32 vs B with fp16 state: A's state is cast for B's replay and the initial state too."""
    result = run_sequence(rnn_models["lstm"], rnn_models["lstm_fp16"], rnn_models["steps"],
                          SequenceConfig(gates=(parse_gate("min-cosine", "0.999999999"),), steps=5))
    assert result.steps == 5 and result.divergence is not None and result.divergence.step == 0
    assert [w.dtype for w in result.wiring] == ["float32", "float32"]
