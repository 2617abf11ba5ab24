"""Every command's tables fit 80, 100 and 120 columns; no cell breaks a number or a shape (issue 20)."""
from __future__ import annotations

import io
from pathlib import Path
from typing import Dict, List

import numpy as np
import onnx
import pytest

from inspector_cli.render.console import make_console, print_view
from inspector_cli.render.fit import Layout, elide_middle, fit_table, is_nowrap, shorten_verdict
from inspector_cli.render.views import view_for
from inspector_cli.serialize import read_result

from ..fixtures import nan_models as nm
from ..fixtures.helpers import affine_model, invoke

WIDTHS = (80, 100, 120)
LONG = "backbone/encoder/layer_12/attention/output/dense/MatMul_output_0"


@pytest.fixture(scope="module")
def results(cnn_pair, tmp_path_factory) -> Dict[str, Path]:
    """One saved result per command (and compare twice: layers with isolation, long tensor names)."""
    fp32, int8, data = cnn_pair
    tmp = tmp_path_factory.mktemp("widths")
    long_a, long_b = tmp / "long_a.onnx", tmp / "long_b.onnx"
    onnx.save(affine_model(1.0, 0.0, shape=(1, 3, 4, 4), out=LONG, inp="images/preprocessed/normalised_input"), long_a)
    onnx.save(affine_model(1.01, 0.001, shape=(1, 3, 4, 4), out=LONG, inp="images/preprocessed/normalised_input"),
              long_b)
    nan_path, nan_data = nm.write(tmp / "nan", nm.chain(), [{"x": np.full((1, 8), -1.0, np.float32)}])
    runs = {
        "compare-layers": (["compare", fp32, int8, "-i", data, "--layers", "all", "--isolate", "worst:2",
                            "--min-cosine", "0.9999"], 1),
        "compare-long": (["compare", long_a, long_b, "--layers", "all", "--samples", "2"], 0),
        "validate": (["validate", int8], None),
        "profile": (["profile", fp32, "--runs", "2", "--warmup", "0"], 0),
        "probe": (["probe", fp32, "-i", data, "-s", "op:Relu"], None),
        "nan-bisect": (["nan-bisect", nan_path, "--inputs", nan_data], 1),
    }
    paths = {}
    for kind, (args, code) in runs.items():
        paths[kind] = tmp / f"{kind}.json"
        invoke([*args, "--json", paths[kind]], exit_code=code)
    return paths


def render(path: Path, width: int, layout: Layout) -> List[str]:
    buffer = io.StringIO()
    print_view(view_for(read_result(path)), make_console(buffer, no_color=True, width=width), layout)
    return buffer.getvalue().splitlines()


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("kind", ["compare-layers", "compare-long", "validate", "profile", "probe", "nan-bisect"])
def test_every_line_fits_and_no_cell_breaks(results, kind, width):
    lines = render(results[kind], width, Layout())
    too_long = [line for line in lines if len(line.rstrip()) > width]
    assert not too_long, f"{len(too_long)} line(s) wider than {width}: {too_long[0]!r}"
    view = view_for(read_result(results[kind]))
    for table in view.tables:
        fitted = fit_table(table, width)
        for i, header in enumerate(fitted.columns):
            if not is_nowrap(fitted, i):
                continue
            for row in fitted.rows:
                text = row[i].text
                assert any(text in line for line in lines), f"{kind} at {width}: '{header}' cell {text!r} broken"
    # The verdict is the last line, one line.
    assert lines[-1].rstrip() == shorten_verdict(view.verdict, width)[1]


def test_layer_table_shows_the_essential_columns_by_default_and_the_rest_on_request(results):
    table = view_for(read_result(results["compare-layers"])).tables[0]
    default = fit_table(table, 120)
    assert default.columns == ["#", "tensor", "op", "cosine", "SQNR dB", "max abs", "paired", "note"]
    assert fit_table(table, 120, Layout(columns=("shape", "max_rel"))).columns == [
        "#", "tensor", "op", "shape", "cosine", "SQNR dB", "max abs", "max rel", "paired", "note"]
    assert fit_table(table, 120, Layout(wide=True)).columns == table.columns
    assert "isolated cos" in table.columns and "own share" in table.columns  # --isolate ran


def test_long_names_are_shortened_in_the_middle_and_kept_whole_in_json(results):
    lines = render(results["compare-long"], 80, Layout())
    row = next(line for line in lines if line.startswith("0  "))  # the layer table's only row
    assert "…" in row and row.split()[1].startswith("backbone/") and row.split()[1].endswith("_output_0") and LONG not in row
    assert read_result(results["compare-long"]).layers.layers[-1].name == LONG


def test_elide_middle_keeps_both_ends():
    assert elide_middle("abcdefghij", 10) == "abcdefghij"
    assert elide_middle("abcdefghij", 7) == "abc…hij"
    assert elide_middle("abcdefghij", 6) == "ab…hij"  # the end tells layers apart: it keeps more


def test_a_long_verdict_keeps_its_head_on_the_last_line():
    verdict = "FAIL: 2 output(s) compared over 6 sample(s); 1 gate(s) failed; 11 layer(s) compared"
    before, last = shorten_verdict(verdict, 70)
    assert last == "FAIL: 2 output(s) compared over 6 sample(s); 1 gate(s) failed"
    assert before == ["  11 layer(s) compared"]
    assert shorten_verdict(verdict, 120) == ([], verdict)


def test_wide_and_columns_work_from_the_command_line(results):
    env = {"COLUMNS": "120"}
    default = invoke(["report", results["compare-layers"]], exit_code=None, env=env).stdout
    wide = invoke(["report", results["compare-layers"], "--wide"], exit_code=None, env=env).stdout
    some = invoke(["report", results["compare-layers"], "--columns", "shape"], exit_code=None, env=env).stdout
    header = next(line for line in default.splitlines() if line.lstrip().startswith("#  tensor"))
    assert "shape" not in header and "mean abs" not in header
    assert "isolated cos" in wide and "mean abs" in wide
    assert "1x16x32x32" in some and "isolated cos" not in some
