"""Hints and warnings that repeat one message for many nodes are one row each (issue 32)."""
from __future__ import annotations

import io
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from inspector_cli.render.console import make_console, print_view
from inspector_cli.render.fit import Layout
from inspector_cli.render.grouping import first_names, group_messages, template
from inspector_cli.render.views import view_for
from inspector_cli.serialize import read_result

from ..fixtures.helpers import invoke, read_json

IDENTITIES = 18


@pytest.fixture(scope="module")
def identity_model(tmp_path_factory) -> Path:
    """x -> Relu -> 18 Identity nodes -> Sigmoid: what an EfficientNet export leaves behind."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu")]
    previous = "r"
    for i in range(IDENTITIES):
        nodes.append(helper.make_node("Identity", [previous], [f"id{i}"], name=f"Identity_{i}"))
        previous = f"id{i}"
    nodes.append(helper.make_node("Sigmoid", [previous], ["y"], name="sigmoid"))
    graph = helper.make_graph(nodes, "ids", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path_factory.mktemp("ids") / "ids.onnx"
    onnx.save(model, path)
    return path


def tables(json_path: Path) -> dict:
    out = {}
    view = view_for(read_result(json_path))
    print_view(view, make_console(io.StringIO(), no_color=True, width=120), Layout())
    for t in view.tables:
        out[t.title] = t
    return out


def test_profile_hints_are_one_row_per_pattern_with_count_share_and_first_nodes(identity_model, tmp_path):
    report = tmp_path / "profile.json"
    invoke(["profile", identity_model, "--runs", "2", "--warmup", "0", "--json", report], exit_code=None)
    hints = read_json(report)["results"]["profiles"][0]["hints"]
    assert sum(1 for h in hints if h["pattern"] == "identity") == IDENTITIES  # the JSON keeps every match
    table = tables(report)["hints"]
    rows = [[c.text for c in r] for r in table.rows if r[0].text == "identity"]
    assert len(rows) == 1
    row = dict(zip(table.columns, rows[0]))
    assert row["count"] == str(IDENTITIES)
    identity = [h for h in hints if h["pattern"] == "identity"]
    assert row["share"] == f"{sum(h['share'] for h in identity):.1%}"
    first = [h["nodes"][0] for h in identity[:3]]
    assert row["nodes"] == f"{', '.join(first)} (+{IDENTITIES - 3} more)"


def test_messages_differing_only_in_quoted_names_become_one_line():
    messages = [f"output '{n}' has no value in sample 3" for n in ("a", "b", "c", "d")] + ["something else"]
    assert group_messages(messages) == ["4×: output '…' has no value in sample 3 (e.g. 'a', 'b', 'c' (+1 more))",
                                        "something else"]
    assert group_messages(["only 'one'"]) == ["only 'one'"]


def test_template_and_first_names():
    assert template("Identity 'n1' feeds t1", "n1", "t1") == "Identity '…' feeds …"
    assert first_names(["a", "b"]) == "a, b"
    assert first_names(["a", "b", "c", "d", "e"]) == "a, b, c (+2 more)"
