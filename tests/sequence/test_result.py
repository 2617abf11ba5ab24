"""The sequence result: JSON round trip, schema, tables, HTML time-line; the bounded time-line itself."""
from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from inspector_cli.diff.gates import parse_gate
from inspector_cli.render.html import render_html
from inspector_cli.render.text import view_to_plain
from inspector_cli.render.views import view_for
from inspector_cli.sequence import SequenceConfig, run_sequence
from inspector_cli.sequence.stats import TimelineBuilder
from inspector_cli.serialize import envelope, result_from_document, result_to_json

SCHEMAS = Path(__file__).resolve().parents[2] / "inspector_cli" / "schemas"


@pytest.fixture(scope="module")
def drifting(rnn_models):
    return run_sequence(rnn_models["lstm"], rnn_models["lstm_recurrence"], rnn_models["steps"],
                        SequenceConfig(gates=(parse_gate("min-cosine", "0.99"),)))


def test_json_round_trip_and_schema(drifting):
    text = result_to_json(drifting)
    document = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    assert document["kind"] == "sequence" and document["verdict"]["exit_code"] == 1
    schema = json.loads((SCHEMAS / "sequence.schema.json").read_text())
    jsonschema.validate(document, schema, cls=jsonschema.Draft202012Validator)
    back = result_from_document(json.loads(text))
    assert back == drifting
    assert [c.name for c in back.checks()] == ["--min-cosine 0.99 on logits", "non-finite values"]
    assert [c.passed for c in back.checks()] == [False, True]


def test_tables_name_the_wiring_and_the_events(drifting):
    text = view_to_plain(view_for(drifting))
    assert "hn" in text and "h0" in text and "cn" in text
    step = drifting.divergence.step
    assert "born in the state" in text and "first gate failure" in text
    events = view_for(drifting).tables[1]
    assert [row[1].text for row in events.rows if row[0].text == "born in the state"] == [str(step)]


def test_html_time_line_marks_the_first_divergence(drifting):
    html = render_html([drifting], created="2026-01-01 00:00 UTC")
    step = drifting.divergence.step
    assert 'data-role="timeline"' in html and "line-chart" in html
    assert f"first divergence, born in the state (step {step})" in html
    assert "step (60 steps)" in html
    assert html.count("<polyline") == 2  # the output's cosine and the state's


def test_time_line_stays_bounded_and_keeps_the_worst_value():
    builder = TimelineBuilder("cosine", "y", capacity=64)
    for step in range(10_000):
        builder.add(step, 0.5 if step == 7777 else 1.0, 0.9)
    result = builder.result(with_drift=True)
    assert len(result.steps) <= 64 and result.bucket == 256  # 10,000 steps / 256 = 40 points
    assert len(result.steps) == 40 and result.steps[:3] == [0, 256, 512]
    index = 7777 // 256
    assert result.values[index] == 0.5 and sum(v == 0.5 for v in result.values) == 1
    assert set(result.drift) == {0.9}


def test_envelope_records_the_config(drifting):
    document = envelope(drifting)
    assert document["config"]["gates"] == ["--min-cosine 0.99"]
    assert document["results"]["wiring"][0] == {"input": "h0", "output": "hn", "dtype": "float32",
                                                "shape": "[1, 1, 16]", "kv_cache": False, "source": "auto"}
