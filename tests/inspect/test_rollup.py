"""Roll-ups by scope equal an independent aggregation of the per-node rows."""
from __future__ import annotations

from collections import defaultdict

import pytest

from inspector_cli.results.scopes import rollup, scope_at, scope_totals
from inspector_cli.testing.transformer import build_transformer

from ..fixtures.helpers import invoke, read_json, save

NODE_SCOPE = {"a": "enc/0/attn", "b": "enc/0/ffn", "c": "enc/1/attn", "d": "head", "e": ""}


def test_rollup_by_hand():
    rows = [("a", {"t": 1.0, "err": 0.5}), ("b", {"t": 2.0, "err": 0.1}), ("c", {"t": 4.0, "err": None}),
            ("d", {"t": 8.0, "err": 0.9}), ("e", {"t": 16.0, "err": 0.0}), ("zz", {"t": 32.0, "err": 0.2})]
    rolled = {r.scope: r for r in rollup(NODE_SCOPE, rows, {"t": "sum", "err": "max"}, depth=1)}
    assert set(rolled) == {"enc", "head", ""}
    assert rolled["enc"].values == {"t": 7.0, "err": 0.5} and rolled["enc"].rows == 3
    assert rolled[""].values == {"t": 48.0, "err": 0.2}  # 'e' and the unknown node 'zz' count at the model
    deep = {r.scope: r.values["t"] for r in rollup(NODE_SCOPE, rows, {"t": "sum"}, depth=2)}
    assert deep == {"enc/0": 3.0, "enc/1": 4.0, "head": 8.0, "": 48.0}
    leaf = {r.scope: r.values["t"] for r in rollup(NODE_SCOPE, rows, {"t": "sum"}, depth=None)}
    assert leaf["enc/0/attn"] == 1.0
    counted = {r.scope: r.values["err"] for r in rollup(NODE_SCOPE, rows, {"err": "count"}, depth=1)}
    assert counted["enc"] == 2.0
    with pytest.raises(ValueError):
        rollup(NODE_SCOPE, rows, {"t": "median"})


def test_scope_totals_cover_every_level():
    totals = scope_totals(NODE_SCOPE, {"a": 1.0, "b": 2.0, "c": 4.0, "d": 8.0})
    assert totals == {"": 15.0, "enc": 7.0, "enc/0": 3.0, "enc/0/attn": 1.0, "enc/0/ffn": 2.0, "enc/1": 4.0,
                      "enc/1/attn": 4.0, "head": 8.0}
    assert scope_at("enc/0/attn", 2) == "enc/0" and scope_at("enc", 3) == "enc"


def test_profile_rollup_equals_aggregation_of_its_kernels(tmp_path):
    model = save(build_transformer(layers=2), tmp_path / "tr.onnx")
    out = tmp_path / "p.json"
    result = invoke(["profile", model, "--runs", "3", "--warmup", "1", "--shape", "input_ids:1x16",
                     "--group-by", "scope:2", "--json", out])
    assert result.output.index("time by scope") < result.output.index("profile of")  # the roll-up comes first
    doc = read_json(out)["results"]
    profile = doc["profiles"][0]
    node_scope = doc["scope_map"]["node_scope"]
    expected_time = defaultdict(float)
    expected_kernels = defaultdict(int)
    for kernel in profile["kernels"]:
        first = kernel["original_nodes"][0] if kernel["original_nodes"] else ""
        scope = "/".join(node_scope.get(first, "").split("/")[:2]) if node_scope.get(first) else ""
        expected_time[scope] += kernel["per_run_us"]
        expected_kernels[scope] += 1
    rows = {r["scope"]: r for r in profile["scope_rollup"]}
    assert set(rows) == set(expected_time)
    assert {"layers/0", "layers/1", "embeddings"} <= set(rows)
    for scope, row in rows.items():
        assert row["values"]["time_us"] == pytest.approx(expected_time[scope])
        assert row["values"]["kernels"] == expected_kernels[scope]
        assert row["values"]["share"] == pytest.approx(expected_time[scope] / profile["kernel_sum_us"])
    assert profile["group_depth"] == 2


def test_bad_group_by_is_a_usage_error(tmp_path):
    model = save(build_transformer(layers=1), tmp_path / "tr.onnx")
    result = invoke(["profile", model, "--group-by", "layer"], exit_code=2)
    assert "--group-by" in result.output
