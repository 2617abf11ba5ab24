"""compare --layers, probe and nan-bisect roll-ups by scope equal an aggregation written out here.

Each test recomputes the roll-up from the per-layer rows of the saved JSON (tensor -> producing
node from the section's nodes, node -> scope from its map, cut to the depth) and compares it with
what the command stored; then checks a few values by hand.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from inspector_cli.testing.models import build_cnn, image_samples, quantize_qdq

from ..fixtures import nan_models
from ..fixtures.helpers import invoke, read_json, save, save_npz
from .models import hostile_model


def _scope_of(doc, depth):
    producer = {t: n["name"] for n in doc["scopes"]["nodes"] for t in n["outputs"]}
    node_scope = doc["scopes"]["map"]["node_scope"]

    def scope(node_or_tensor):
        path = node_scope.get(producer.get(node_or_tensor, node_or_tensor), "")
        return "/".join(path.split("/")[:depth]) if path and depth else path
    return scope


def _num(value):
    return float("inf") if value == "inf" else value


@pytest.fixture(scope="module")
def cnn_pair(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cnn")
    fp32 = save(build_cnn(), folder / "cnn.onnx")
    int8 = quantize_qdq(fp32, folder / "cnn_int8.onnx", image_samples(4, seed=3))
    save_npz(folder / "images", image_samples(3, seed=4))
    return fp32, int8, folder / "images"


def test_compare_rollup_equals_aggregation_of_layers(cnn_pair, tmp_path):
    fp32, int8, images = cnn_pair
    out = tmp_path / "c.json"
    result = invoke(["compare", fp32, int8, "--inputs", images, "--layers", "all", "--isolate", "all",
                     "--layer-min-cosine", "0.9999", "--group-by", "scope", "--json", out, "--html", tmp_path / "c.html"])
    assert result.output.index("by scope (depth 1, scopes from structure)") < result.output.index("layers in the reference")
    doc = read_json(out)["results"]
    scope = _scope_of(doc, 1)
    expected = defaultdict(lambda: {"cosine": [], "sqnr": [], "diverged": 0, "first": None, "own": []})
    for layer in doc["layers"]["layers"]:
        e = expected[scope(layer["name"])]
        e["cosine"].append(layer["dataset"]["cosine"])
        e["sqnr"].append(_num(layer["dataset"]["sqnr"]))
        if layer["failed_gates"]:
            e["diverged"] += 1
            e["first"] = e["first"] or layer["name"]  # rows are in topological order
        if layer["own_share"] is not None:
            e["own"].append(layer["own_share"])
    rows = {r["scope"]: r for r in doc["scopes"]["rollup"]}
    assert set(rows) == set(expected) and {"block0", "block1", "block2"} <= set(rows)
    for name, e in expected.items():
        v = rows[name]["values"]
        assert v["cosine"] == pytest.approx(min(e["cosine"]))
        assert _num(v["sqnr"]) == pytest.approx(min(e["sqnr"]))
        assert v["diverged"] == e["diverged"]
        assert rows[name]["labels"].get("first_divergence") == e["first"]
        assert v["own_share"] == (pytest.approx(max(e["own"])) if e["own"] else None)
    assert any(e["own"] for e in expected.values())  # isolation ran: the own-share column is not empty
    # the model's first divergence is the first divergence of the first scope that has one
    firsts = [rows[s]["labels"]["first_divergence"] for s in rows if "first_divergence" in rows[s]["labels"]]
    assert firsts[0] == doc["layers"]["first_divergence"]
    # the HTML map shows A and B side by side with the change of the aligned scope
    html = (tmp_path / "c.html").read_text()
    assert '<div class="smap">' in html and 'class="pair"' in html and "Colour: cosine" in html
    assert "Q/DQ +" in html
    invoke(["report", out, "--html", tmp_path / "r.html", "--map", "sqnr"])
    assert "Colour: sqnr" in (tmp_path / "r.html").read_text()


def test_group_by_depth_and_bad_value(cnn_pair, tmp_path):
    fp32, int8, images = cnn_pair
    bad = invoke(["compare", fp32, int8, "--layers", "all", "--group-by", "scope:0"], exit_code=2)
    assert "--group-by" in bad.output and "scope:DEPTH" in bad.output
    out = tmp_path / "p.json"
    invoke(["probe", fp32, "--inputs", images, "--group-by", "scope:leaf", "--no-history", "--json", out])
    doc = read_json(out)["results"]
    assert doc["scopes"]["depth"] is None and doc["scopes"]["group_by"] is True


def test_probe_rollup_equals_aggregation_of_tensors(cnn_pair, tmp_path):
    _, int8, images = cnn_pair
    out = tmp_path / "p.json"
    result = invoke(["probe", int8, "--inputs", images, "--quant-ranges", "--no-history", "--group-by", "scope",
                     "--json", out], exit_code=None)
    assert result.output.index("by scope") < result.output.index("ranges over")
    doc = read_json(out)["results"]
    scope = _scope_of(doc, 1)
    expected = defaultdict(lambda: defaultdict(float))
    for t in doc["tensors"]:
        e = expected[scope(t["node"] or t["name"])]
        e["tensors"] += 1
        e["nonfinite"] += t["nan"] + t["inf"]
        e["dead_units"] += len(t["channels"]["dead"]) if t["channels"] else 0
    for q in doc["quant"]:
        e = expected[scope(q["node"])]
        e["saturated"] += q["saturated"]
        e["quantised_values"] += q["count"]
    rows = {r["scope"]: r["values"] for r in doc["scopes"]["rollup"]}
    assert set(rows) == set(expected)
    for name, e in expected.items():
        assert rows[name]["tensors"] == e["tensors"] and rows[name]["nonfinite"] == e["nonfinite"]
        assert rows[name]["dead_units"] == e["dead_units"]
        share = e["saturated"] / e["quantised_values"] if e["quantised_values"] else None
        assert rows[name]["saturation_share"] == (pytest.approx(share) if share is not None else None)
    assert sum(e["quantised_values"] for e in expected.values()) > 0  # the int8 model has quantisers


def test_nan_bisect_rollup_counts_origins_per_scope(tmp_path):
    # two origins, 'log' and 'div', renamed into scopes so the roll-up has something to split
    model = nan_models.two_origins()
    for node in model.graph.node:
        node.name = {"log": "left/log", "relu": "left/relu", "abs": "right/abs", "div": "right/div",
                     "add": "right/add"}[node.name]
    path, data = nan_models.write(tmp_path, model, [{"x": nan_models.row(-1, 2, 3, 4)},
                                                    {"x": nan_models.row(1, 2, 3, 4)}])
    out = tmp_path / "n.json"
    result = invoke(["nan-bisect", path, "--inputs", data, "--all", "--group-by", "scope", "--json", out], exit_code=1)
    assert result.output.index("by scope") < result.output.index("nan-bisect")
    doc = read_json(out)["results"]
    scope = _scope_of(doc, 1)
    expected = defaultdict(lambda: [0, 0])
    for group in doc["groups"]:
        if group["kind"] == "origin":
            expected[scope(group["node"])][0] += 1
            expected[scope(group["node"])][1] += group["samples"]
    rows = {r["scope"]: [r["values"]["origins"], r["values"]["origin_samples"]] for r in doc["scopes"]["rollup"]}
    assert rows == dict(expected)
    assert rows["left"] == [1, 1] and rows["right"] == [1, 2]  # Log of -1 in sample 0; x/0 in both


def test_compare_map_escapes_hostile_names(tmp_path):
    path = hostile_model(tmp_path / "evil.onnx")
    save_npz(tmp_path / "x", [{"x": np.ones((1, 4), np.float32)}])
    invoke(["compare", path, path, "--inputs", tmp_path / "x", "--layers", "all", "--group-by", "scope",
            "--html", tmp_path / "e.html"])
    html = (tmp_path / "e.html").read_text()
    assert "<script>alert" not in html and "<img" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def _rollup_pair(args, tmp_path, exit_code=0):
    """The JSON scope section of a run without --group-by/--html (no map built) and with --group-by."""
    light, full = tmp_path / "light.json", tmp_path / "full.json"
    invoke([*args, "--json", light], exit_code=exit_code)
    invoke([*args, "--group-by", "scope", "--json", full], exit_code=exit_code)
    return read_json(light)["results"]["scopes"], read_json(full)["results"]["scopes"]


def test_compare_rollup_without_map_equals_the_full_one(cnn_pair, tmp_path):
    fp32, int8, images = cnn_pair
    light, full = _rollup_pair(["compare", fp32, int8, "--inputs", images, "--layers", "all",
                                "--layer-min-cosine", "0.9999"], tmp_path, exit_code=None)
    assert light["rollup"] == full["rollup"] and [r["scope"] for r in light["rollup"]][:3] == ["", "block0", "block1"]
    assert light["map"]["scopes"] == [] and light["nodes"] == [] and light["other_map"] is None
    assert light["map"]["source"] == full["map"]["source"] == "structure"
    assert full["map"]["scopes"] and full["nodes"]
    # re-rendering the light result with a map says why there is none and what keeps it
    refused = invoke(["report", tmp_path / "light.json", "--html", tmp_path / "r.html", "--map", "cosine"],
                     exit_code=2)
    assert refused.stderr.strip().splitlines()[-1] == (
        "Error: --map cosine: this compare result has no scope map (its run saved only the depth-1 roll-up: "
        "run it again with --html or --group-by scope to keep the whole map in the JSON)")
    invoke(["report", tmp_path / "full.json", "--html", tmp_path / "r.html", "--map", "cosine"])


def test_probe_rollup_without_map_equals_the_full_one_on_named_scopes(tmp_path):
    from inspector_cli.testing.transformer import build_transformer

    model = save(build_transformer(layers=3, hidden=16, heads=2, ffn=32, vocab=50, seq=8), tmp_path / "tr.onnx")
    light, full = _rollup_pair(["probe", model, "--no-history"], tmp_path)
    assert light["rollup"] == full["rollup"]
    assert [r["scope"] for r in light["rollup"]] == ["", "embeddings", "layers", "final_norm"]
    assert light["map"]["scopes"] == [] and full["map"]["source"] == light["map"]["source"] == "names"
    assert set(light["map"]["node_scope"]) <= set(full["map"]["node_scope"])
    assert all(full["map"]["node_scope"][n] == s for n, s in light["map"]["node_scope"].items())
