"""--break-on: each kind stops at the right sample and tensor; dumps; chunked runs."""
from __future__ import annotations

import numpy as np
import pytest

from inspector_cli.errors import UsageError
from inspector_cli.probe.triggers import parse_trigger

from ..fixtures.helpers import invoke, read_json
from ..fixtures.probe_models import scale_relu, trigger_samples


@pytest.fixture()
def case(tmp_path):
    model = scale_relu(tmp_path / "m.onnx", 2.0)
    xs = trigger_samples(tmp_path / "data")
    return model, tmp_path / "data", xs


def run(tmp_path, model, data, *args, exit_code=1):
    out = tmp_path / "r.json"
    invoke(["probe", model, "--inputs", data, "--no-history", "--json", out, *args], exit_code=exit_code)
    return read_json(out)["results"]


@pytest.mark.parametrize("conditions, sample, tensor", [
    (["nan"], 3, "m"),
    (["inf"], 4, "m"),
    (["absmax>1e4"], 1, "m"),
    (["zero_frac>0.9"], 2, "y"),                    # m has no zeros; y = relu(negative) is all zero
    (["y:zero_frac>=1 & max<=0"], 2, "y"),          # terms joined by & on one tensor
    (["m:nan", "absmax > 1e4"], 1, "m"),            # several --break-on: any of them
    (["inf and mean>0"], 4, "m"),
])
def test_each_trigger_stops_at_the_first_matching_sample(tmp_path, case, conditions, sample, tensor):
    model, data, _ = case
    args = [a for c in conditions for a in ("--break-on", c)]
    res = run(tmp_path, model, data, *args)
    trig = res["trigger"]
    assert (trig["sample_index"], trig["sample"], trig["tensor"]) == (sample, f"s{sample:03d}.npz", tensor)
    assert res["samples"] == sample + 1  # statistics cover the samples up to and including the trigger
    assert all(t["samples"] == sample + 1 for t in res["tensors"])
    assert any(f["rule"] == "MI824" for f in res["findings"])


def test_no_trigger_met_runs_every_sample(tmp_path, case):
    model, data, _ = case
    res = run(tmp_path, model, data, "--break-on", "min<-1e9", exit_code=1)  # NaN/Inf samples still fail
    assert res["trigger"] is None and res["samples"] == 5


def test_dump_writes_the_sample_and_respects_the_cap(tmp_path, case):
    model, data, xs = case
    res = run(tmp_path, model, data, "--break-on", "nan", "--dump", tmp_path / "d")
    dump = res["trigger"]["dump"]
    with np.load(dump["tensors_path"], allow_pickle=False) as tensors:
        np.testing.assert_array_equal(tensors["m"], xs[3] * 2)
        np.testing.assert_array_equal(tensors["y"], np.maximum(xs[3] * 2, 0))
    with np.load(dump["inputs_path"], allow_pickle=False) as inputs:
        np.testing.assert_array_equal(inputs["x"], xs[3])
    res = run(tmp_path, model, data, "--break-on", "nan", "--dump", tmp_path / "d2", "--dump-max-bytes", "70")
    dump = res["trigger"]["dump"]
    assert dump["written"] == ["m"] and dump["skipped"] == ["y"] and dump["bytes"] == 64


def test_dump_without_trigger_is_a_usage_error(tmp_path, case):
    model, data, _ = case
    result = invoke(["probe", model, "--inputs", data, "--no-history", "--dump", tmp_path / "d"], exit_code=2)
    assert "--dump needs --break-on" in result.stderr


def test_chunked_capture_restarts_when_a_later_chunk_triggers_earlier(tmp_path, case):
    """One tensor per chunk: m triggers on sample 3 (NaN), y on sample 2 (all zero)."""
    model, data, xs = case
    res = run(tmp_path, model, data, "--capture-budget", "1", "--break-on", "m:nan", "--break-on",
              "y:zero_frac>0.9", "--dump", tmp_path / "d")
    assert res["capture"]["runs_per_sample"] == 2
    assert (res["trigger"]["tensor"], res["trigger"]["sample_index"]) == ("y", 2)
    m = next(t for t in res["tensors"] if t["name"] == "m")
    assert m["samples"] == 3 and m["nan"] == 0  # sample 3's NaN is past the trigger: rebuilt without it
    assert m["max"] == float(np.max(np.stack(xs[:3]) * 2))
    assert any("recomputed" in w for w in res["warnings"])
    with np.load(res["trigger"]["dump"]["tensors_path"]) as tensors:
        assert sorted(tensors.files) == ["m", "y"] and not tensors["y"].any()


def test_parse_errors_name_the_problem():
    assert parse_trigger("relu*:zero_frac>0.9").tensors == "relu*"
    with pytest.raises(UsageError, match="unknown statistic 'bogus'"):
        parse_trigger("bogus>1")
    with pytest.raises(UsageError, match="cannot read"):
        parse_trigger("absmax>>3")
