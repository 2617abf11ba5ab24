"""Placement of compare, probe and nan-bisect sessions on the CPU build (runs everywhere), and the
capture-honesty logic fed with hand-made partitions (the real partition change: test_openvino.py)."""
from __future__ import annotations

from types import SimpleNamespace

from inspector_cli.core.runner import RuntimeConfig
from inspector_cli.results.placement import build_placement
from inspector_cli.placement import (
    mark_moved_rows,
    moved_tensors,
    partition_changes,
    plain_check_wanted,
    placement_findings,
    unchecked_note,
)

from ..fixtures.helpers import invoke, read_json
from ..fixtures.subproc import assert_status, run_mi
from .models import conv_block

CPU = "CPUExecutionProvider"
OV = "OpenVINOExecutionProvider"
OV_RUNTIME = RuntimeConfig(providers=("openvino", "cpu"))
FOUR = {"conv": CPU, "relu": CPU, "sig": CPU, "mul": CPU}


def test_partition_change_over_chunks_merges_the_moved_nodes():
    plain = build_placement("B", OV, [(OV, [("a", "Conv"), ("b", "Relu"), ("c", "Mul")]), (CPU, [("d", "Det")])])
    chunk_1 = [(OV, [("a", "Conv"), ("b", "Relu"), ("c", "Mul")]), (CPU, [("d", "Det")])]  # as plain
    chunk_2 = [(CPU, [("a", "Conv")]), (OV, [("b", "Relu"), ("c", "Mul")]), (CPU, [("d", "Det")])]
    change = partition_changes(plain, [chunk_1, chunk_2], OV_RUNTIME, "B")
    assert change.moved == {"a": [OV, CPU]} and change.changed
    assert (change.subgraphs_plain, change.subgraphs_instrumented) == (1, 1)
    same = partition_changes(plain, [chunk_1], OV_RUNTIME, "B")
    assert not same.changed and same.line() == "B: exposing tensors left the provider partition as in the plain session"
    # CPU partitions come and go with unfused nodes: an extra CPU partition is no change of OpenVINO's
    extra_cpu = [*chunk_1, (CPU, [("e", "Identity")])]
    assert not partition_changes(plain, [extra_cpu], OV_RUNTIME, "B").changed
    split = [(OV, [("a", "Conv")]), (OV, [("b", "Relu"), ("c", "Mul")]), (CPU, [("d", "Det")])]
    assert partition_changes(plain, [split], OV_RUNTIME, "B").subgraphs_instrumented == 2
    assert partition_changes(None, [chunk_1], OV_RUNTIME, "B") is None


def test_moved_rows_are_those_whose_producer_moved():
    plain = build_placement("B", OV, [(OV, [("a", "Conv"), ("b", "Relu")])])
    change = partition_changes(plain, [[(CPU, [("a", "Conv")]), (OV, [("b", "Relu")])]], OV_RUNTIME, "B")
    graph = SimpleNamespace(nodes=[SimpleNamespace(name="a", outputs=["ta"]), SimpleNamespace(name="b", outputs=["tb"])])
    assert moved_tensors(change, graph) == {"ta"}
    row = SimpleNamespace(name="xa", name_b="ta", moved=[])
    other = SimpleNamespace(name="xb", name_b="tb", moved=[])
    layers = SimpleNamespace(layers=[row, other])
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Row:
        name: str
        name_b: str
        moved: list

    @dataclasses.dataclass(frozen=True)
    class Section:
        layers: list

    marked = mark_moved_rows(Section([Row("xa", "ta", []), Row("xb", "tb", [])]), {"B": {"ta"}, "A": {"xb"}})
    assert [(r.name, r.moved) for r in marked.layers] == [("xa", ["B"]), ("xb", ["A"])]
    assert mark_moved_rows(layers, {"B": set()}) is layers


def test_require_provider_checks_the_sessions_asked_for_it():
    a = build_placement("A", CPU, [(CPU, [("n1", "Conv")])])
    b = build_placement("B", OV, [(OV, [("n1", "Conv")]), (CPU, [("n2", "Det")])])
    (finding,) = placement_findings([a, b], "openvino")  # A (CPU) was not asked for OpenVINO: not checked
    assert finding.rule == "MI871" and finding.data["nodes"] == {"n2": CPU} and finding.message.startswith("B: 1 of 2")
    both = placement_findings([a, build_placement("B", CPU, [(CPU, [("n1", "Conv")])])], "openvino")
    assert [f.message.split(":")[0] for f in both] == ["A", "B"]  # nobody asked for it: every session fails
    assert placement_findings([a, b], None) == [] and placement_findings([a], "cpu") == []


def test_the_plain_session_is_built_when_asked_or_within_3_percent_of_the_run():
    assert plain_check_wanted("openvino", 5.0, 1.0)  # --require-provider: whatever it costs
    assert plain_check_wanted(None, 0.3, 10.0) and not plain_check_wanted(None, 0.31, 10.0)
    assert not plain_check_wanted(None, 0.0, 0.0)
    assert unchecked_note(RuntimeConfig(), 1.0, 10.0) == []  # CPU only: nothing can move, nothing to say
    assert unchecked_note(OV_RUNTIME, 1.4, 10.0) == [
        "placement read from a session with tensors exposed: comparing it with the plain session's takes one "
        "more session build (~1.4 s, 14% of this run; done unasked under 3%); --require-provider NAME builds it"]


def test_compare_on_cpu_records_both_placements_and_prints_no_table(tmp_path):
    model, out = conv_block(tmp_path), tmp_path / "r.json"
    result = invoke(["compare", model, model, "--json", out])
    placement = read_json(out)["results"]["placement"]
    assert [(p["session"], p["requested"], p["nodes"]) for p in placement] == [("A", CPU, FOUR), ("B", CPU, FOUR)]
    assert "placement of" not in result.stdout  # CPU only: the JSON says it, the table would not


def test_compare_on_workers_sends_the_placement_back(tmp_path):
    model, out = conv_block(tmp_path), tmp_path / "r.json"
    invoke(["compare", model, model, "--workers", "2", "--json", out])
    assert [p["nodes"] for p in read_json(out)["results"]["placement"]] == [FOUR, FOUR]


def test_compare_layers_on_cpu_reads_placement_without_partition_check(tmp_path):
    model, out = conv_block(tmp_path), tmp_path / "r.json"
    invoke(["compare", model, model, "--layers", "all", "--json", out])
    doc = read_json(out)["results"]
    assert [p["nodes"] for p in doc["placement"]] == [FOUR, FOUR] and doc["partition"] == []
    assert all(row["moved"] == [] for row in doc["layers"]["layers"])


def test_compare_require_provider_fails_in_a_real_process_naming_the_nodes(tmp_path):
    model, out = conv_block(tmp_path), tmp_path / "r.json"
    ran = run_mi(["compare", model, model, "--require-provider", "openvino", "--json", out], cwd=tmp_path)
    assert_status(ran, 1)
    findings = [f for f in read_json(out)["results"]["findings"] if f["rule"] == "MI871"]
    assert [f["message"] for f in findings] == [
        f"{m}: 4 of 4 nodes did not run on OpenVINOExecutionProvider: conv (Conv on {CPU}), relu (Relu on {CPU}), "
        f"sig (Sigmoid on {CPU}), mul (Mul on {CPU})" for m in "AB"]
    assert "placement of A" in ran.stdout  # --require-provider shows the table even on CPU


def test_compare_require_provider_from_the_config_file(tmp_path):
    model, config = conv_block(tmp_path), tmp_path / "mi.yaml"
    config.write_text("version: 1\ncompare:\n  require-provider: cpu\n")
    invoke(["-c", config, "compare", model, model])
    config.write_text("version: 1\ncompare:\n  require-provider: openvino\n")
    result = invoke(["-c", config, "compare", model, model], exit_code=1)
    assert "A: 4 of 4 nodes did not run on OpenVINOExecutionProvider" in " ".join(result.stdout.split())


def test_probe_and_nan_bisect_on_cpu_record_the_placement(tmp_path):
    model, out = conv_block(tmp_path), tmp_path / "p.json"
    invoke(["probe", model, "--no-history", "--json", out])
    doc = read_json(out)["results"]
    assert doc["placement"]["nodes"] == FOUR and doc["partition"] is None
    assert [t["moved"] for t in doc["tensors"]] == [False] * len(doc["tensors"]) and doc["tensors"]
    ran = run_mi(["nan-bisect", model, "--require-provider", "openvino", "--json", tmp_path / "n.json"], cwd=tmp_path)
    assert_status(ran, 1)
    doc = read_json(tmp_path / "n.json")["results"]
    assert doc["placement"]["nodes"] == FOUR
    assert [f["data"]["nodes"] for f in doc["findings"] if f["rule"] == "MI871"] == [FOUR]
    invoke(["nan-bisect", model, "--require-provider", "cpu"])
