"""Placement on the CPU build: every node on CPUExecutionProvider, exact counts, and the summary
arithmetic (shares, transfers, fallback, partition change) on hand-made partitions."""
from __future__ import annotations

import pytest

from inspector_cli.results.placement import (
    build_placement,
    partition_change,
    require_provider_findings,
)

from ..fixtures.helpers import invoke, read_json
from .models import conv_block

CPU = "CPUExecutionProvider"
OV = "OpenVINOExecutionProvider"


def test_profile_places_every_node_on_cpu(tmp_path):
    model, out, html = conv_block(tmp_path), tmp_path / "r.json", tmp_path / "r.html"
    result = invoke(["profile", model, "--runs", "2", "--warmup", "0", "--no-memory-stats", "--json", out,
                     "--html", html])
    assert "placement of" in result.stdout and "4 partition(s)" in result.stdout
    assert "placement of" in html.read_text() and "read from onnxruntime&#39;s assignment" in html.read_text()
    placement = read_json(out)["results"]["profiles"][0]["placement"]
    assert placement["requested"] == CPU and placement["source"] == "assignment"
    assert placement["nodes"] == {"conv": CPU, "relu": CPU, "sig": CPU, "mul": CPU}
    assert [(p["provider"], p["nodes"], p["node_share"]) for p in placement["providers"]] == [(CPU, 4, 1.0)]
    assert placement["providers"][0]["time_share"] == 1.0 and placement["providers"][0]["time_us"] > 0
    assert placement["fallback"] == [] and placement["transfers"] == []


def test_require_provider_cpu_passes_and_another_fails_naming_every_node(tmp_path):
    model = conv_block(tmp_path)
    invoke(["profile", model, "--runs", "1", "--warmup", "0", "--no-memory-stats", "--require-provider", "cpu"])
    out = tmp_path / "r.json"
    result = invoke(["profile", model, "--runs", "1", "--warmup", "0", "--no-memory-stats",
                     "--require-provider", "OpenVINOExecutionProvider", "--json", out], exit_code=1)
    assert "4 of 4 nodes did not run on OpenVINOExecutionProvider: conv (Conv on CPUExecutionProvider)" \
        in " ".join(result.stdout.split())
    finding = [f for f in read_json(out)["results"]["findings"] if f["rule"] == "MI871"][0]
    assert finding["data"]["nodes"] == {"conv": CPU, "relu": CPU, "sig": CPU, "mul": CPU}


def test_shares_transfers_and_fallback_in_graph_order():
    subgraphs = [(OV, [("a", "Conv"), ("b", "Relu"), ("d", "Add")]), (CPU, [("e", "Det")]), (CPU, [("c", "Sigmoid")])]
    kernels = [("OpenVINOExecutionProvider_OpenVINO-EP-subgraph_1_0", "OpenVINO-EP-subgraph_1", OV, 60.0),
               ("e", "Det", CPU, 20.0), ("c", "Sigmoid", CPU, 10.0), ("copy", "MemcpyToHost", CPU, 10.0)]
    p = build_placement("m", OV, subgraphs, kernels, order=["a", "b", "c", "d", "e"])
    assert [(s.provider, s.nodes, s.node_share, s.time_us, s.time_share) for s in p.providers] == \
        [(OV, 3, 0.6, 60.0, 0.6), (CPU, 2, 0.4, 30.0, 0.3)]
    assert [(t.provider, t.nodes, t.time_us, t.time_share) for t in p.transfers] == [("MemcpyToHost", 1, 10.0, 0.1)]
    assert [(f.node, f.op_type) for f in p.fallback] == [("c", "Sigmoid"), ("e", "Det")]
    assert p.subgraphs == 3 and p.summary() == \
        "5 nodes: 3 on OpenVINOExecutionProvider (60% of the time), 2 on CPUExecutionProvider (30% of the time)"
    (finding,) = require_provider_findings(p, OV)
    assert finding.rule == "MI871" and finding.node == "c" and finding.data["nodes"] == {"c": CPU, "e": CPU}
    assert require_provider_findings(p, None) == []


def test_without_assignment_the_kernels_are_the_placement():
    p = build_placement("m", CPU, None, [("k1", "Conv", CPU, 5.0), ("k2", "MemcpyFromHost", CPU, 1.0)])
    assert p.source == "profile" and p.nodes == {"k1": CPU} and p.transfers[0].provider == "MemcpyFromHost"


@pytest.mark.parametrize("moved", [True, False])
def test_partition_change(moved):
    plain = build_placement("plain", OV, [(OV, [("a", "Conv"), ("b", "Relu")])])
    split = [(OV, [("a", "Conv")]), (CPU if moved else OV, [("b", "Relu")])]
    change = partition_change(plain, build_placement("instrumented", OV, split))
    assert change.changed  # two subgraphs where there was one, moved or not
    assert change.moved == ({"b": [OV, CPU]} if moved else {})
    same = partition_change(plain, build_placement("instrumented", OV, [(OV, [("a", "Conv"), ("b", "Relu")])]))
    assert not same.changed and same.line().startswith("plain: exposing tensors left")


def test_require_provider_from_the_config_file(tmp_path):
    model, config = conv_block(tmp_path), tmp_path / "mi.yaml"
    config.write_text("version: 1\nprofile:\n  require-provider: openvino\n  runs: 1\n  warmup: 0\n")
    result = invoke(["-c", config, "profile", model, "--no-memory-stats"], exit_code=1)
    assert "4 of 4 nodes did not run on OpenVINOExecutionProvider" in " ".join(result.stdout.split())
