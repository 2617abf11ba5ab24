"""Plugins: loaded by module:Class and by entry point, shown in the JSON; the shipped attention entropy."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest
from onnx import helper

from ..fixtures.helpers import invoke, make_model, read_json, save, save_npz, vi
from ..fixtures.probe_models import scale_relu

PLUGIN = textwrap.dedent('''
    from inspector_cli.plugins import Plugin

    class Counter(Plugin):
        name = "counter"
        description = "positive values"

        def __init__(self):
            self.rows = {}

        def accepts(self, name, node):
            return node is not None and node.op_type in ("Mul", "Relu")

        def process_tensor(self, name, array, node):
            row = self.rows.setdefault(name, {"positive": 0, "op": node.op_type})
            row["positive"] += int((array > 0).sum())

        def summary(self):
            return self.rows

    class Broken(Counter):
        def process_tensor(self, name, array, node):
            raise ValueError("boom")
''')


@pytest.fixture()
def plugin_env(tmp_path, monkeypatch):
    (tmp_path / "plugmod").mkdir()
    (tmp_path / "plugmod" / "fakeplug.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path / "plugmod"))
    model = scale_relu(tmp_path / "m.onnx", -1.0)
    xs = [np.array([1, -2, 3, -4, 5, 6, -7, 8, 9, 10, 11, 12, -13, 14, 15, 16], np.float32).reshape(1, 4, 2, 2)]
    save_npz(tmp_path / "data", [{"x": x} for x in xs * 2])
    return model, tmp_path / "data"


def run_plugins(tmp_path, model, data, *specs, exit_code=0):
    args = [a for s in specs for a in ("--plugin", s)]
    invoke(["probe", model, "--inputs", data, "--no-history", "--json", tmp_path / "r.json", *args],
           exit_code=exit_code)
    return read_json(tmp_path / "r.json")["results"]["plugins"] if exit_code == 0 else None


def test_plugin_by_module_and_class(tmp_path, plugin_env):
    model, data = plugin_env
    plugins = run_plugins(tmp_path, model, data, "fakeplug:Counter")
    # m = -x has 4 positives per sample (x has 4 negatives), y = relu(m) the same 4; two samples.
    assert plugins == [{"name": "counter", "spec": "fakeplug:Counter", "description": "positive values",
                        "rows": {"m": {"positive": 8, "op": "Mul"}, "y": {"positive": 8, "op": "Relu"}}}]
    table = invoke(["probe", model, "--inputs", data, "--no-history", "--plugin", "fakeplug:Counter",
                    "--format", "markdown"]).stdout
    assert "plugin counter" in table and "| m " in table


def test_plugin_by_entry_point(tmp_path, plugin_env, monkeypatch):
    model, data = plugin_env
    dist = tmp_path / "site" / "fakeplug-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fakeplug\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[mi.plugins]\npositive-counter = fakeplug:Counter\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    plugins = run_plugins(tmp_path, model, data, "positive-counter")
    assert plugins[0]["spec"] == "positive-counter" and plugins[0]["rows"]["y"]["positive"] == 8


def test_plugin_errors(tmp_path, plugin_env):
    model, data = plugin_env
    r = invoke(["probe", model, "--inputs", data, "--no-history", "--plugin", "no-such-plugin"], exit_code=2)
    assert "no such plugin" in r.stderr
    r = invoke(["probe", model, "--inputs", data, "--no-history", "--plugin", "fakeplug:Missing"], exit_code=2)
    assert "has no 'Missing'" in r.stderr
    r = invoke(["probe", model, "--inputs", data, "--no-history", "--plugin", "fakeplug:Broken"], exit_code=3)
    assert "plugin 'counter' failed in process_tensor on tensor 'm': ValueError: boom" in r.stderr


def test_attention_entropy_plugin(tmp_path):
    nodes = [helper.make_node("Softmax", ["x"], ["p"], name="attn", axis=-1)]
    model = save(make_model(nodes, [vi("x", [2, 4])], [vi("p", [2, 4])]), tmp_path / "s.onnx")
    x = np.array([[0, 0, 0, 0], [50, 0, 0, 0]], np.float32)  # a uniform row and a collapsed row
    save_npz(tmp_path / "data", [{"x": x}])
    invoke(["probe", model, "--inputs", tmp_path / "data", "--plugin", "attention-entropy", "--no-history",
            "--json", tmp_path / "r.json"])
    row = read_json(tmp_path / "r.json")["results"]["plugins"][0]["rows"]["p"]
    p = np.exp(x - x.max(axis=1, keepdims=True)).astype(np.float64)
    p /= p.sum(axis=1, keepdims=True)
    h = -(np.where(p > 0, p * np.log(np.where(p > 0, p, 1)), 0)).sum(axis=1) / np.log(4)
    assert row["rows"] == 2 and row["length"] == 4
    assert row["mean_entropy"] == pytest.approx(h.mean(), abs=1e-6)
    assert row["max_entropy"] == pytest.approx(1.0, abs=1e-6) and row["min_entropy"] < 1e-15
    assert row["collapsed_share"] == 0.5 and row["uniform_share"] == 0.5
