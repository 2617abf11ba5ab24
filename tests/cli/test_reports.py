"""Reports: JSON schemas, HTML structure and injection safety, JUnit, Model Explorer data, diffs."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from onnx import helper

from inspector_cli.results.schema import all_schemas
from inspector_cli.serialize import write_atomic

from ..fixtures.helpers import affine_model, invoke, make_model, read_json, save, save_npz, vi

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "inspector_cli" / "schemas"
SNAPSHOTS = Path(__file__).resolve().parents[1] / "snapshots"


@pytest.fixture()
def runs(tmp_path):
    """Two compare runs: 'good' passes, 'bad' (a worse candidate) fails the same gates."""
    a = save(affine_model(), tmp_path / "a.onnx")
    b_good = save(affine_model(scale=1.001), tmp_path / "b_good.onnx")
    b_bad = save(affine_model(scale=1.1, shift=0.05), tmp_path / "b_bad.onnx")
    data = save_npz(tmp_path / "data", [{"x": np.array([[1, 2, 3, 4]], np.float32)}])
    out = {}
    for name, b, code in (("good", b_good, 0), ("bad", b_bad, 1)):
        paths = {k: tmp_path / f"{name}.{k}" for k in ("json", "html", "xml")}
        invoke(["compare", a, b, "--inputs", data, "--max-abs", "0.1", "--min-cosine", "0.999",
                "--json", paths["json"], "--html", paths["html"], "--junit", paths["xml"],
                "--model-explorer", tmp_path / f"{name}.me.json"], exit_code=code)
        out[name] = paths
    return out


def test_shipped_schemas_are_up_to_date():
    generated = all_schemas()
    shipped = {p.name.removesuffix(".schema.json") for p in SCHEMAS.glob("*.schema.json")}
    assert shipped == set(generated), "run scripts/gen_schemas.py"
    for kind, schema in generated.items():
        on_disk = json.loads((SCHEMAS / f"{kind}.schema.json").read_text())
        assert on_disk == json.loads(json.dumps(schema)), f"{kind}.schema.json is stale: run scripts/gen_schemas.py"
        jsonschema.Draft202012Validator.check_schema(on_disk)


def validate_document(document):
    schema = json.loads((SCHEMAS / f"{document['kind']}.schema.json").read_text())
    jsonschema.validate(document, schema, cls=jsonschema.Draft202012Validator)


def test_outputs_validate_against_their_schema(runs, tmp_path):
    for name in ("good", "bad"):
        validate_document(read_json(runs[name]["json"]))
    invoke(["report", runs["good"]["json"], runs["bad"]["json"], "--diff", "--json", tmp_path / "d.json"], exit_code=1)
    validate_document(read_json(tmp_path / "d.json"))


def test_nonfinite_numbers_are_explicit_strings(runs):
    text = runs["good"]["json"].read_text()
    assert "Infinity" not in text and "NaN" not in text
    document = read_json(runs["good"]["json"])
    per_sample = document["results"]["outputs"][0]["per_sample"][0]["metrics"]
    assert isinstance(per_sample["sqnr"], float)
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))


class Skeleton(HTMLParser):
    """The structure of a report: sections, headings, captions, banners, charts (not the numbers)."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list = []
        self._capture = None
        self.scripts = 0
        self.external = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script":
            self.scripts += 1
        for key in ("src", "href"):
            if a.get(key) and not a[key].startswith("#"):
                self.external.append(a[key])
        if tag == "section":
            self.lines.append(f"section kind={a.get('data-kind')}")
        elif tag in ("h1", "h2", "h3", "caption"):
            self._capture = tag
        elif tag == "div" and "banner" in (a.get("class") or ""):
            self.lines.append(f"banner {a.get('class').split()[-1]}")
        elif tag == "svg" and "chart" in (a.get("class") or ""):
            self.lines.append(f"chart {a.get('class')}")
        elif tag == "table":
            self.lines.append(f"table {a.get('class') or ''}".strip())

    def handle_data(self, data):
        if self._capture and data.strip():
            text = data.strip()
            if self._capture == "caption" and text.startswith("output '"):
                text = text.split("  ")[0]
            self.lines.append(f"{self._capture} {text}")
            self._capture = None


def skeleton(path: Path) -> Skeleton:
    parser = Skeleton()
    parser.feed(path.read_text())
    return parser


def check_snapshot(name: str, lines: list) -> None:
    path = SNAPSHOTS / f"{name}.txt"
    text = "\n".join(lines) + "\n"
    if os.environ.get("MI_UPDATE_SNAPSHOTS"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no snapshot {path}; run with MI_UPDATE_SNAPSHOTS=1 once and review it"
    assert text == path.read_text(), f"HTML structure of {name} changed; review, then MI_UPDATE_SNAPSHOTS=1"


def test_html_structure_snapshot_compare(runs):
    bad = skeleton(runs["bad"]["html"])
    assert bad.scripts == 0 and bad.external == []
    check_snapshot("compare", bad.lines)


def test_html_structure_snapshot_report_diff(runs, tmp_path):
    invoke(["report", runs["good"]["json"], runs["bad"]["json"], "--diff", "--html", tmp_path / "d.html"], exit_code=1)
    check_snapshot("report-diff", skeleton(tmp_path / "d.html").lines)


def test_report_rerenders_saved_result_identically(runs, tmp_path):
    invoke(["report", runs["bad"]["json"], "--html", tmp_path / "again.html"], exit_code=1)
    assert skeleton(tmp_path / "again.html").lines == skeleton(runs["bad"]["html"]).lines


def test_several_results_in_one_html(runs, tmp_path):
    invoke(["report", runs["good"]["json"], runs["bad"]["json"], "--html", tmp_path / "all.html"], exit_code=1)
    lines = skeleton(tmp_path / "all.html").lines
    assert lines.count("section kind=compare") == 2 and "banner fail" in lines


INJECTIONS = ["<script>alert(1)</script>", "<img src=x onerror=alert(2)>", "\"><svg onload=alert(3)>",
              "{{ 7*7 }}", "</style><script>alert(4)</script>"]


def test_model_strings_render_inert(tmp_path):
    evil_out = INJECTIONS[1]
    nodes = [helper.make_node("Relu", ["x"], [evil_out], name=INJECTIONS[0], doc_string=INJECTIONS[2])]
    model = make_model(nodes, [vi("x", [1, 4])], [vi(evil_out, [1, 4])], name=INJECTIONS[4])
    model.producer_name = INJECTIONS[3]
    model.metadata_props.add(key="<b>k</b>", value=INJECTIONS[0])
    path = save(model, tmp_path / "evil.onnx")
    invoke(["compare", path, path, "--html", tmp_path / "e.html", "--junit", tmp_path / "e.xml",
            "--model-explorer", tmp_path / "e.me.json", "--max-abs", f"{evil_out}=0.1"])
    html = (tmp_path / "e.html").read_text()
    parsed = skeleton(tmp_path / "e.html")
    assert parsed.scripts == 0 and parsed.external == []
    for raw in ("<script>", "<img src=x", "<svg onload", "</style><script>"):
        assert raw not in html
    assert "&lt;img src=x onerror=alert(2)&gt;" in html  # shown, as text
    assert "{{ 7*7 }}" in html and ">49<" not in html   # not evaluated as a template
    ET.parse(tmp_path / "e.xml")  # still well-formed XML
    (graph_data,) = read_json(tmp_path / "e.me.json").values()
    assert evil_out in graph_data["results"]  # keys stay the real tensor names


def test_junit_parses_with_values_and_thresholds(runs):
    root = ET.parse(runs["bad"]["xml"]).getroot()
    assert root.tag == "testsuites" and root.get("tests") == "2" and root.get("failures") == "1"
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert set(cases) == {"--min-cosine 0.999 on y", "--max-abs 0.1 on y"}
    failure = cases["--max-abs 0.1 on y"].find("failure")
    assert failure is not None and "measured 0.45" in failure.get("message") and "threshold 0.1" in failure.get("message")
    assert cases["--min-cosine 0.999 on y"].find("failure") is None


def test_model_explorer_node_data_structure(runs, tmp_path):
    first = read_json(tmp_path / "bad.me.json")
    (graph_id, data), = first.items()
    assert graph_id == "g"  # the ONNX graph's name, as Model Explorer's ONNX adapter uses
    assert set(data) == {"results", "thresholds"}
    assert data["results"]["y"]["value"] == pytest.approx(read_json(runs["bad"]["json"])["results"]["outputs"][0]
                                                         ["dataset"]["cosine"])
    values = [t["value"] for t in data["thresholds"]]
    assert values == sorted(values) and all("bgColor" in t for t in data["thresholds"])
    assert (tmp_path / "bad.me.max_abs.json").exists() and (tmp_path / "bad.me.sqnr.json").exists()


def test_diff_regression_and_no_regression(runs, tmp_path):
    result = invoke(["report", runs["good"]["json"], runs["bad"]["json"], "--diff", "--json", tmp_path / "d.json"],
                    exit_code=1)
    assert "REGRESSION" in result.stdout
    doc = read_json(tmp_path / "d.json")["results"]
    flipped = {c["name"] for c in doc["check_changes"] if c["new"] is False and c["old"] is True}
    assert flipped == {"--max-abs 0.1 on y"}
    assert {(w["metric"], w["key"]) for w in doc["worse"]} >= {("max_abs", "y"), ("cosine", "y")}
    invoke(["report", runs["good"]["json"], runs["good"]["json"], "--diff"], exit_code=0)
    improved = invoke(["report", runs["bad"]["json"], runs["good"]["json"], "--diff", "--json", tmp_path / "i.json"],
                      exit_code=0)
    assert "NO REGRESSION" in improved.stdout and read_json(tmp_path / "i.json")["results"]["better"]


def test_diff_of_different_kinds_is_usage_error(runs, tmp_path):
    invoke(["report", runs["good"]["json"], runs["bad"]["json"], "--diff", "--json", tmp_path / "d.json"], exit_code=1)
    result = invoke(["report", runs["good"]["json"], tmp_path / "d.json", "--diff"], exit_code=2)
    assert "cannot diff a 'compare' result" in result.stderr


def test_atomic_write_keeps_old_file_on_interrupt(tmp_path):
    target = tmp_path / "r.json"
    target.write_text("old")

    def writer(handle):
        handle.write("half a rep")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_atomic(target, writer)
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_unwritable_report_paths_fail_before_work(tmp_path, monkeypatch):
    a = save(affine_model(), tmp_path / "a.onnx")

    def never(*args, **kwargs):
        raise AssertionError("inference started although a report path is unusable")

    monkeypatch.setattr("inspector_cli.workflows.compare.compare_models", never)
    for flag in ("--html", "--junit", "--model-explorer"):
        result = invoke(["compare", a, a, flag, tmp_path / "missing" / "r.out"], exit_code=2)
        assert flag in result.stderr and "does not exist" in result.stderr


def test_report_needs_no_onnxruntime(runs):
    code = ("import sys; from click.testing import CliRunner; from inspector_cli.cli import cli; "
            f"r = CliRunner().invoke(cli, ['report', {str(runs['bad']['json'])!r}, '--format', 'markdown']); "
            "assert r.exit_code == 1, r.output; print('onnxruntime' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_broken_result_file(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{not json")
    assert "not valid JSON" in invoke(["report", bad], exit_code=3).stderr
    bad.write_text(json.dumps({"kind": "compare", "schema_version": 99}))
    assert "schema_version 99" in invoke(["report", bad], exit_code=3).stderr


def test_html_profile_has_charts_and_tables(tmp_path):
    model = save(affine_model(shape=(1, 64)), tmp_path / "m.onnx")
    invoke(["profile", model, "--runs", "3", "--warmup", "1", "--html", tmp_path / "p.html",
            "--model-explorer", tmp_path / "p.me.json"])
    lines = skeleton(tmp_path / "p.html").lines
    assert "section kind=profile" in lines and "banner pass" in lines
    assert lines.count("chart chart bar-chart") == 2  # op-type shares, critical path
    captions = [line for line in lines if line.startswith("caption ")]
    assert any("top kernels" in c for c in captions) and any("op type" in c for c in captions)
    (data,) = read_json(tmp_path / "p.me.json").values()
    assert set(data["results"]) == {"mul", "add"}  # keyed by original node name
    assert all(v["value"] > 0 for v in data["results"].values())


def test_html_probe_has_stats_with_histograms_and_saturation(cnn_pair, tmp_path):
    _, int8, data = cnn_pair
    invoke(["probe", int8, "--inputs", data, "--select", "op:Conv", "--quant-ranges", "--no-history",
            "--html", tmp_path / "p.html", "--model-explorer", tmp_path / "p.me.json"], exit_code=None)
    html = (tmp_path / "p.html").read_text()
    lines = skeleton(tmp_path / "p.html").lines
    assert "section kind=probe" in lines and "table stats" in lines
    assert html.count('class="sparkline"') >= 1  # a histogram per probed tensor
    assert "chart chart bar-chart" in lines        # saturation per quantiser
    metrics = {"p.me.json", "p.me.zero_frac.json", "p.me.std.json", "p.me.saturated_share.json"}
    assert metrics <= {p.name for p in tmp_path.iterdir()}


def test_html_compare_layers_chart_marks_first_divergence(cnn_pair, tmp_path):
    fp32, int8, data = cnn_pair
    invoke(["compare", fp32, int8, "--inputs", data, "--layers", "all", "--layer-min-cosine", "0.9999",
            "--json", tmp_path / "l.json", "--html", tmp_path / "l.html", "--model-explorer", tmp_path / "me.json"])
    section = read_json(tmp_path / "l.json")["results"]["layers"]
    first = section["first_divergence"]
    html = (tmp_path / "l.html").read_text()
    lines = skeleton(tmp_path / "l.html").lines
    assert lines.count("chart chart line-chart") == 2
    assert f"first divergence: {first}" in html.replace("<code>", "").replace("</code>", "")
    assert html.count('class="marker"') >= 2  # first divergence (and worst layers) on both charts
    (data_me,) = read_json(tmp_path / "me.json").values()
    assert list(data_me["results"])[: len(section["layers"])] == [layer["name"] for layer in section["layers"]]


def test_html_nan_bisect_shows_origins_and_hints(tmp_path):
    from onnx import helper as onnx_helper

    model = save(make_model([onnx_helper.make_node("Log", ["x"], ["y"], name="log_node")], [vi("x", [1, 4])],
                            [vi("y", [1, 4])]), tmp_path / "log.onnx")
    data = save_npz(tmp_path / "d", [{"x": np.array([[1, 2, 3, 4]], np.float32)},
                                     {"x": np.array([[1, 0, 3, 4]], np.float32)}])
    invoke(["nan-bisect", model, "--inputs", data, "--html", tmp_path / "n.html", "--junit", tmp_path / "n.xml",
            "--model-explorer", tmp_path / "n.me.json"], exit_code=1)
    html = (tmp_path / "n.html").read_text()
    assert "chart chart bar-chart" in skeleton(tmp_path / "n.html").lines
    assert 'data-role="hints"' in html and "Log of values &lt;= 0" in html and "float32 overflow" not in html
    cases = {c.get("name"): c for c in ET.parse(tmp_path / "n.xml").getroot().iter("testcase")}
    assert cases["weights hold no NaN/Inf"].find("failure") is None
    assert cases["outputs stay finite"].find("failure") is not None
    (data_me,) = read_json(tmp_path / "n.me.json").values()
    assert data_me["results"] == {"log_node": {"value": 1.0}}  # one of two samples fails there


def test_every_command_output_validates_against_its_schema(cnn_pair, tmp_path):
    """One JSON document per kind, each checked against inspector_cli/schemas/<kind>.schema.json."""
    fp32, int8, data = cnn_pair
    runs = {
        "compare": ["compare", fp32, int8, "-i", data, "--layers", "all", "--isolate", "worst:2"],
        "validate": ["validate", int8, "--against", fp32],
        "probe": ["probe", int8, "-i", data, "--select", "op:Conv", "--quant-ranges", "--no-history"],
        "nan-bisect": ["nan-bisect", fp32, "-i", data],
        "profile": ["profile", fp32, "--against", int8, "--runs", "3", "--warmup", "1"],
        "inputs": ["inputs", "show", data],
        "inspect": ["inspect", fp32, "--diff", int8],
        "fix": ["fix", fp32, int8, "-i", data, "--target", "cosine>=0.9", "--max-runs", "6"],
    }
    seen = set()
    for kind, args in runs.items():
        out = tmp_path / f"{kind}.json"
        invoke([*args, "--json", out], exit_code=None)
        document = read_json(out)
        assert document["kind"] == kind
        validate_document(document)
        seen.add(kind)
    suite = tmp_path / "suite.yaml"
    suite.write_text(f"version: 1\nsteps:\n  - name: lint\n    validate:\n      model: {fp32}\n"
                     f"  - name: acc\n    compare:\n      model-a: {fp32}\n      model-b: {int8}\n      inputs: {data}\n")
    invoke(["run", suite, "--json", tmp_path / "suite.json"], exit_code=None)
    validate_document(read_json(tmp_path / "suite.json"))
    seen.add("suite")
    history = tmp_path / "hist"
    invoke(["probe", int8, "-i", data, "--select", "op:Conv", "--history-dir", history], exit_code=None)
    for kind, args in (("probe-list", ["probe", int8, "--list"]),
                       ("probe-history", ["probe", "--history", "--history-dir", history])):
        invoke([*args, "--json", tmp_path / f"{kind}.json"], exit_code=None)
        document = read_json(tmp_path / f"{kind}.json")
        assert document["kind"] == kind
        validate_document(document)
        seen.add(kind)
    shipped = {p.name.removesuffix(".schema.json") for p in SCHEMAS.glob("*.schema.json")}
    # report-diff is validated in test_outputs_validate_against_their_schema; sequence (no command flags
    # until issue 19 phase 2) in tests/sequence/test_result.py
    assert shipped - seen <= {"report-diff", "sequence"}
