"""Rows of a narrow table never read the same when their names differ (issue 32).

Checked on a real export (the zoo's transformers ResNet and its int8 QDQ variant, built by
scripts/zoo.py and cached): `compare --layers all`, `profile` and `probe --list` at 80/100/120
columns, on the tables the terminal really draws (console.fit_table is wrapped to see them).
"""
from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from inspector_cli.render import console
from inspector_cli.render.console import make_console, print_view
from inspector_cli.render.fit import Layout
from inspector_cli.render.names import common_affixes, compact_column, drop_common_segments, elide_distinct
from inspector_cli.render.table import Table
from inspector_cli.render.views import view_for
from inspector_cli.serialize import read_result

from ..fixtures.helpers import invoke

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("MI_ZOO_CACHE", Path.home() / ".cache" / "mi-zoo"))
WIDTHS = (80, 100, 120)


@pytest.fixture(scope="module")
def resnet() -> Path:
    pytest.importorskip("torch", reason="the zoo needs the dev extra (torch, transformers)")
    pytest.importorskip("transformers")
    out = CACHE / "zoo-names"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "zoo.py"), str(out), "--only", "resnet",
                    "--variants", "qdq_u8u8"], check=True, capture_output=True, text=True)
    return out / "resnet"


@pytest.fixture(scope="module")
def results(resnet, tmp_path_factory) -> Dict[str, Path]:
    tmp = tmp_path_factory.mktemp("names")
    runs = {
        "compare": ["compare", resnet / "fp32.onnx", resnet / "qdq_u8u8.onnx", "-i", resnet / "data",
                    "--layers", "all", "--samples", "2"],
        "profile": ["profile", resnet / "qdq_u8u8.onnx", "--runs", "2", "--warmup", "0"],
        "probe": ["probe", resnet / "fp32.onnx", "--list"],
    }
    paths = {}
    for kind, args in runs.items():
        paths[kind] = tmp / f"{kind}.json"
        invoke([*args, "--json", paths[kind]], exit_code=None)
        assert paths[kind].exists(), kind
    return paths


def drawn_tables(path: Path, width: int, monkeypatch, layout: Layout = Layout()) -> List[Tuple[Table, Table]]:
    """(the table as built, the table as fitted to `width`) for every table the terminal draws."""
    seen: List[Tuple[Table, Table]] = []
    real = console.fit_table

    def spy(table, w, lay=Layout()):
        fitted = real(table, w, lay)
        seen.append((table, fitted))
        return fitted

    monkeypatch.setattr(console, "fit_table", spy)
    print_view(view_for(read_result(path)), make_console(io.StringIO(), no_color=True, width=width), layout)
    return seen


def name_columns(table: Table) -> List[str]:
    return [c for c in table.columns if c.lower() in {"tensor", "kernel", "node", "producer", "name", "nodes"}]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("kind", ["compare", "profile", "probe"])
def test_no_two_rows_read_the_same(results, kind, width, monkeypatch):
    checked = 0
    for built, fitted in drawn_tables(results[kind], width, monkeypatch):
        for column in name_columns(fitted):
            src, dst = built.columns.index(column), fitted.columns.index(column)
            full = [r[src].text for r in built.rows]
            shown = [r[dst].text for r in fitted.rows]
            pairs = {}
            for f, s in zip(full, shown):
                if f:
                    pairs.setdefault(s, set()).add(f)
            clashes = {s: names for s, names in pairs.items() if len(names) > 1}
            assert not clashes, f"{kind} at {width}: {built.title!r} column {column!r}: {clashes}"
            checked += len(set(full))
    assert checked >= 20  # the ResNet has 24 compared layers: the check saw real rows


def test_the_layer_table_at_100_columns_keeps_the_stage_and_block(results, monkeypatch):
    (built, fitted), *_ = [p for p in drawn_tables(results["compare"], 100, monkeypatch) if "layers" in p[0].title]
    shown = [r[fitted.columns.index("tensor")].text for r in fitted.rows]
    full = [r[built.columns.index("tensor")].text for r in built.rows]
    stage_rows = [s for s, f in zip(shown, full) if "/stages.1/" in f]
    assert stage_rows and all("stages.1" in s for s in stage_rows)
    assert not any(s.endswith("_output_0") for s in shown)
    assert "suffix '_output_0'" in fitted.caption


def test_wide_keeps_full_names(results, monkeypatch):
    for built, fitted in drawn_tables(results["compare"], 80, monkeypatch, Layout(wide=True)):
        for column in name_columns(fitted):
            assert [r[fitted.columns.index(column)].text for r in fitted.rows] == \
                   [r[built.columns.index(column)].text for r in built.rows]


def test_common_affixes_ignore_unscoped_inputs_and_cut_at_separators():
    names = ["pixel_values", "/m/enc/a/Conv_output_0", "/m/enc/b/Relu_output_0", "logits"]
    assert common_affixes(names) == ("/m/enc/", "_output_0")
    texts, note = compact_column(names)
    assert texts == ["pixel_values", "a/Conv", "b/Relu", "logits"]
    assert note == "prefix '/m/enc/' and suffix '_output_0'"


def test_a_scope_that_repeats_its_parent_keeps_the_child_only():
    texts, note = compact_column(["/layer1/layer1.0/relu/Relu_output_0", "/layer1/layer1.1/relu/Relu_output_0",
                                  "/conv1/Conv_output_0"])
    assert texts == ["/layer1.0/relu/Relu", "/layer1.1/relu/Relu", "/conv1/Conv"]


def test_the_cut_moves_to_where_two_names_differ():
    # The torchvision rows: cut in the middle alike, 3 and 6 read the same.
    names = ["/layer1/layer1.0/relu/Relu_output_0", "/layer1/layer1.1/relu/Relu_output_0"]
    shown = elide_distinct(names, 16)
    assert len(set(shown)) == 2 and all(len(s) <= 16 for s in shown)
    assert {s[s.index("layer1.") + 7] for s in shown if "layer1." in s} <= {"0", "1"}


def test_shared_segments_go_before_distinguishing_ones():
    names = [f"encoder/stages.{s}/layers.0/layer.{b}/convolution/Conv" for s in range(2) for b in range(2)]
    shown = drop_common_segments(names, 30)
    assert shown == [f"…/stages.{s}/…/layer.{b}/…/Conv" for s in range(2) for b in range(2)]
