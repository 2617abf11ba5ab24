"""Run history: saving, pruning to --keep-runs, --since last|RUN_ID, and --history listing."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ..fixtures.helpers import invoke, read_json, save_npz
from ..fixtures.probe_models import scale_relu


@pytest.fixture()
def setup(tmp_path):
    model = scale_relu(tmp_path / "m.onnx", 2.0)
    save_npz(tmp_path / "data", [{"x": np.full((1, 4, 2, 2), v, np.float32)} for v in (0.5, 1.0, -1.0)])
    return model, tmp_path / "data", tmp_path / "hist"


def probe(model, data, hist, out, *args, exit_code=0):
    invoke(["probe", model, "--inputs", data, "--history-dir", hist, "--json", out, *args], exit_code=exit_code)
    return read_json(out)["results"]


def test_runs_are_pruned_to_keep_runs(tmp_path, setup):
    model, data, hist = setup
    ids = [probe(model, data, hist, tmp_path / f"r{i}.json", "--keep-runs", "3")["history"] for i in range(5)]
    folder = Path(ids[0]["saved"]).parent
    kept = sorted(p.stem for p in folder.glob("*.json"))
    assert kept == sorted(h["run_id"] for h in ids[2:])
    assert [h["pruned"] for h in ids] == [0, 0, 0, 1, 1]
    other = probe(model, data, hist, tmp_path / "o.json", "--select", "y")["history"]  # another selection: own key
    assert other["key"] != ids[0]["key"] and other["pruned"] == 0


def test_since_last_and_since_run_id_show_each_change(tmp_path, setup):
    model, data, hist = setup
    first = probe(model, data, hist, tmp_path / "a.json")["history"]["run_id"]
    scale_relu(model, 3.0)  # re-exported model at the same path: same history key
    res = probe(model, data, hist, tmp_path / "b.json", "--since", "last")
    changes = {(c["tensor"], c["stat"]): c for c in res["history"]["changes"]}
    assert res["history"]["since"] == first
    assert changes[("m", "max")]["before"] == 2.0 and changes[("m", "max")]["now"] == 3.0
    assert changes[("m", "max")]["rel_change"] == pytest.approx(0.5)
    assert changes[("y", "zero_frac")]["change"] == 0.0
    again = probe(model, data, hist, tmp_path / "c.json", "--since", first, "--no-history")
    assert again["history"]["since"] == first and again["history"]["saved"] is None
    assert {(c["tensor"], c["stat"]): c["now"] for c in again["history"]["changes"]}[("m", "min")] == -3.0


def test_since_without_history_is_a_usage_error(tmp_path, setup):
    model, data, hist = setup
    result = invoke(["probe", model, "--inputs", data, "--history-dir", hist, "--since", "last"], exit_code=2)
    assert f"Error: --since last: no earlier run of this model and selection in {hist}" in result.stderr
    result = invoke(["probe", model, "--inputs", data, "--history-dir", hist, "--since", "20990101-000000-abcdef"],
                    exit_code=2)
    assert f"Error: --since 20990101-000000-abcdef: no such run in {hist}" in result.stderr


def test_history_lists_runs(tmp_path, setup):
    model, data, hist = setup
    probe(model, data, hist, tmp_path / "a.json")
    probe(model, data, hist, tmp_path / "b.json", "--select", "op:Relu")
    invoke(["probe", "--history", "--history-dir", hist, "--json", tmp_path / "h.json"])
    doc = read_json(tmp_path / "h.json")
    runs = doc["results"]["runs"]
    assert doc["kind"] == "probe-history" and [r["selection"] for r in runs] == [["all"], ["op:Relu"]]
    assert runs[0]["model"] == str(Path(model).resolve()) and len(runs[0]["model_sha256"]) == 64
    assert runs[0]["samples"] == 3 and runs[0]["tensors"] == 2
    text = invoke(["probe", "--history", "--history-dir", hist, "--format", "csv"]).stdout
    assert runs[1]["run_id"] in text


def test_unwritable_history_folder_refused_before_any_work(tmp_path, setup):
    # issue 15 item 5: a path through a file cannot be written, even by root (os.access would say yes)
    model, data, _ = setup
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder")
    out = tmp_path / "r.json"
    result = invoke(["probe", model, "--inputs", data, "--history-dir", blocker / "h", "--json", out], exit_code=2)
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert errors == [f"Error: {blocker / 'h'}: cannot write the probe history (Not a directory) "
                      "(choose another place with --history-dir or skip it with --no-history)"]
    assert not out.exists() and blocker.read_text() == "a file, not a folder"
    assert not list(tmp_path.glob("blocker*/.mi-write-check*"))


def test_history_failing_after_the_run_still_writes_json_and_warns(tmp_path, setup, monkeypatch):
    # issue 15 item 5: the folder was fine at the start, the save fails at the end (disk filled,
    # folder removed): the finished result is written, the lost history is a warning, exit 0
    from inspector_cli.probe.history import HistoryStore
    from inspector_cli.errors import UsageError

    def full_disk(self, key, summary):
        raise UsageError(f"{self.directory / key}: cannot write the probe history (No space left on device)")

    monkeypatch.setattr(HistoryStore, "save", full_disk)
    model, data, hist = setup
    out = tmp_path / "r.json"
    result = invoke(["probe", model, "--inputs", data, "--history-dir", hist, "--json", out], exit_code=0)
    document = read_json(out)
    assert document["results"]["samples"] == 3 and document["results"]["history"]["saved"] is None
    warning = [w for w in document["results"]["warnings"] if "not saved to the history" in w]
    assert len(warning) == 1 and "No space left on device" in warning[0] and str(hist) in warning[0]
    assert "not saved to the history" in result.stdout + result.stderr
