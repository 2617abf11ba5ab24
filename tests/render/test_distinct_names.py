"""Rows of a narrow table never read the same when their names differ (issue 32).

Checked on a real export (the zoo's transformers ResNet and its int8 QDQ variant, built by
scripts/zoo.py and cached): `compare --layers all`, `profile`, `probe --list` and `probe --select all`
at 80/100/120 columns, on the tables the terminal really draws (console.fit_table is wrapped to see them).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest

from inspector_cli.render.fit import Layout
from inspector_cli.render.names import common_affixes, compact_column, drop_common_segments, elide_distinct

from ..fixtures.helpers import invoke
from .distinct import WIDTHS, drawn_tables, name_columns, row_clashes

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("MI_ZOO_CACHE", Path.home() / ".cache" / "mi-zoo"))


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
        "probe-stats": ["probe", resnet / "qdq_u8u8.onnx", "-i", resnet / "data", "--samples", "2", "--select", "all",
                        "--no-history"],
    }
    paths = {}
    for kind, args in runs.items():
        paths[kind] = tmp / f"{kind}.json"
        invoke([*args, "--json", paths[kind]], exit_code=None)
        assert paths[kind].exists(), kind
    return paths


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("kind", ["compare", "profile", "probe", "probe-stats"])
def test_no_two_rows_read_the_same(results, kind, width):
    problems, checked = row_clashes(results[kind], (width,))
    assert not problems, f"{kind}:\n" + "\n".join(problems)
    assert checked >= 20  # the ResNet has 24 compared layers: the check saw real rows


def test_the_layer_table_at_100_columns_keeps_the_stage_and_block(results):
    (built, fitted), *_ = [p for p in drawn_tables(results["compare"], 100) if "layers" in p[0].title]
    shown = [r[fitted.columns.index("tensor")].text for r in fitted.rows]
    full = [r[built.columns.index("tensor")].text for r in built.rows]
    stage_rows = [s for s, f in zip(shown, full) if "/stages.1/" in f]
    assert stage_rows and all("stages.1" in s for s in stage_rows)
    assert not any(s.endswith("_output_0") for s in shown)
    assert "suffix '_output_0'" in fitted.caption


def test_wide_keeps_full_names(results):
    for built, fitted in drawn_tables(results["compare"], 80, Layout(wide=True)):
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


def test_names_alike_at_both_ends_are_told_apart_by_a_window_where_they_differ():
    # A QDQ graph's quantiser outputs: alike in their first 14 and last 20 characters, so no single
    # cut of 12 shows 'Quantize' against 'Dequantize'.
    names = ["Relu_output_0_QuantizeLinear_Output", "Relu_output_0_DequantizeLinear_Output"]
    shown = elide_distinct(names, 12)
    assert len(set(shown)) == 2 and all(len(s) == 12 for s in shown)
    # the window form, …where they differ…end, on both rows: each shows its own word, not a shifted cut
    assert shown == ["…_0_Quan…put", "…_0_Dequ…put"]


def test_a_name_on_several_rows_reads_the_same_on_each_and_unlike_the_others():
    # the zoo's dynamic-quantised ResNet in `probe --list`: a node with two outputs is on two rows
    a = "/model/resnet/encoder/stages.3/layers.0/layer/layer.0/activation/Relu_output_0_QuantizeLinear"
    b = a.replace("layer.0/activation", "layer.1/activation")
    shown = elide_distinct([a, a, b, b, b], 12)
    assert shown[0] == shown[1] and shown[2] == shown[3] == shown[4] and shown[0] != shown[2]
    assert all(len(s) <= 12 for s in shown) and "layer.0" in shown[0] and "layer.1" in shown[2]
