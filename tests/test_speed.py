"""The speed work (issue 16) changes how things are computed, never what: checks of that."""
from __future__ import annotations

import dataclasses
import math
from typing import Dict

import numpy as np
import pytest

from inspector_cli.diff import metrics


def test_command_summaries_match_the_commands_own_help() -> None:
    """`mi --help` lists commands from cli.SUMMARIES without importing them: keep it in sync."""
    import click

    from inspector_cli.cli import COMMANDS, SUMMARIES, cli

    assert set(SUMMARIES) == set(COMMANDS)
    ctx = click.Context(cli)
    for name in COMMANDS:
        command = cli.get_command(ctx, name)
        assert command is not None and command.help is not None
        assert command.help.split("\n\n")[0].strip() == SUMMARIES[name], name


def test_group_help_lists_every_command_with_its_summary() -> None:
    from click.testing import CliRunner

    from inspector_cli.cli import cli

    out = CliRunner().invoke(cli, ["--help"], terminal_width=100).output
    assert "  nan-bisect  Find the node where NaN/Inf values are born in MODEL, for each" in out
    assert "  compare     Compare MODEL_B against the reference MODEL_A on the same inputs." in out


# ---- compare_arrays: the fused path gives the bits of the straightforward one ---------------------
def _reference(a: np.ndarray, b: np.ndarray) -> Dict[str, object]:
    """The element sums as compare_arrays computed them before the fused path (isfinite masks, one
    temporary per operation)."""
    a64, b64 = np.asarray(a).astype(np.float64).reshape(-1), np.asarray(b).astype(np.float64).reshape(-1)
    finite_a, finite_b = np.isfinite(a64), np.isfinite(b64)
    out: Dict[str, object] = {"nan_b": int(np.isnan(b64).sum()), "inf_a": int(np.isinf(a64).sum())}
    both = finite_a & finite_b
    a64, b64 = a64[both], b64[both]
    diff = b64 - a64
    abs_diff = np.abs(diff)
    rel = abs_diff / np.maximum(np.abs(a64), metrics.REL_EPSILON)
    out.update(count=int(a64.size), max_abs=float(abs_diff.max()), sum_abs=float(abs_diff.sum()),
               sum_sq_err=float(diff @ diff), dot=float(a64 @ b64), sum_a2=float(a64 @ a64),
               sum_b2=float(b64 @ b64), max_rel=float(rel.max()), sum_rel=float(rel.sum()))
    return out


def _kl_reference(a: np.ndarray, b: np.ndarray) -> float:
    rows_a = a.reshape(-1, a.shape[-1]).astype(np.float64)
    rows_b = b.reshape(-1, b.shape[-1]).astype(np.float64)

    def softmax(rows: np.ndarray) -> np.ndarray:
        exp = np.exp(rows - rows.max(axis=1, keepdims=True))
        return exp / exp.sum(axis=1, keepdims=True)

    p, q = softmax(rows_a), softmax(rows_b)
    eps = metrics.KL_EPSILON
    return float(np.where(p > 0, p * (np.log(np.maximum(p, eps)) - np.log(np.maximum(q, eps))), 0.0).sum())


@pytest.mark.parametrize("shape", [(1, 1000), (1, 128, 256), (64, 3000), (3, 7)])
@pytest.mark.parametrize("dtype_a", [np.float32, np.float16])
def test_fused_compare_arrays_is_bit_identical(shape: tuple, dtype_a: type) -> None:
    rng = np.random.default_rng(3)
    a = rng.normal(size=shape).astype(dtype_a)
    b = (a.astype(np.float32) + rng.normal(scale=0.01, size=shape)).astype(np.float32)
    got = dataclasses.asdict(metrics.compare_arrays(a, b))
    for key, value in _reference(a, b).items():
        assert got[key] == value, key  # exact equality: the same reductions in the same order
    assert got["kl_sum"] == _kl_reference(a, b)
    assert got["kl_rows"] == a.size // shape[-1] and got["kl_mode"] == "softmax"


def test_nonfinite_values_still_take_the_masked_path() -> None:
    a = np.array([[1.0, 2.0, np.inf, 4.0]], np.float32)
    b = np.array([[1.5, np.nan, np.inf, 4.0]], np.float32)
    stats = metrics.compare_arrays(a, b)
    assert (stats.count, stats.nan_b, stats.inf_a, stats.inf_b, stats.nonfinite_mismatch) == (2, 1, 1, 1, 1)
    assert stats.max_abs == 0.5 and stats.sum_abs == 0.5 and stats.kl_rows == 0  # KL skipped on a mismatch
    assert stats.dot == 1.5 + 16.0


def test_float64_squares_overflowing_fall_back_to_the_exact_path() -> None:
    a = np.full((2, 3), 1e200)
    stats = metrics.compare_arrays(a, a * 2.0)
    assert stats.count == 6 and stats.nonfinite_mismatch == 0
    assert math.isinf(stats.sum_a2) and stats.max_abs == 1e200 and stats.max_rel == 1.0


# ---- model hashes: computed in the background, the same sha256 -----------------------------------
def test_background_hash_is_the_files_sha256(tmp_path) -> None:
    import hashlib
    import os

    from inspector_cli.core import filehash

    path = tmp_path / "m.onnx"
    data = bytes(range(256)) * (filehash.BACKGROUND_MIN_BYTES // 256 + 7)
    path.write_bytes(data)
    filehash.prefetch(path)
    assert filehash.sha256(path) == hashlib.sha256(data).hexdigest()
    path.write_bytes(data[:-1])  # a changed file (size and mtime) is hashed again
    os.utime(path, ns=(1, 1))
    assert filehash.sha256(path) == hashlib.sha256(data[:-1]).hexdigest()


def test_loading_a_model_starts_its_hash_and_the_result_uses_it(tmp_path, monkeypatch) -> None:
    import hashlib

    import onnx

    from inspector_cli.core import filehash
    from inspector_cli.core.graph import load_model
    from inspector_cli.results.base import ModelRef
    from inspector_cli.testing.encoder import build_encoder

    path = tmp_path / "enc.onnx"
    onnx.save(build_encoder(2, hidden=256, seq=8), str(path))
    assert path.stat().st_size >= filehash.BACKGROUND_MIN_BYTES
    started = []
    monkeypatch.setattr(filehash.threading, "Thread", _recording_thread(started))
    ref = ModelRef.of(load_model(path))
    assert started == [path]
    assert ref.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def _recording_thread(started: list):  # type: ignore[no-untyped-def]
    import threading

    class Recording(threading.Thread):
        def __init__(self, *, target, args, name, daemon):  # type: ignore[no-untyped-def]
            started.append(args[0])
            super().__init__(target=target, args=args, name=name, daemon=daemon)

    return Recording


# ---- sessions built side by side ------------------------------------------------------------------
def test_open_sessions_builds_each_model_and_reports_the_first_failure_in_order(tmp_path) -> None:
    import onnx

    from inspector_cli.core.graph import ModelGraph
    from inspector_cli.core.runner import RuntimeConfig, open_sessions
    from inspector_cli.errors import InferenceError
    from tests.fixtures.helpers import affine_model

    graphs = [ModelGraph.from_proto(affine_model(scale=s)) for s in (2.0, 3.0)]
    runtime = RuntimeConfig()
    a, b = open_sessions([(graphs[0], runtime, "A"), (graphs[1], runtime, "B")])
    x = np.ones((1, 4), np.float32)
    assert (a.label, b.label) == ("A", "B")
    assert a.run({"x": x})["y"].tolist() == [[2.0] * 4] and b.run({"x": x})["y"].tolist() == [[3.0] * 4]
    broken = affine_model()
    broken.graph.node[0].op_type = "NoSuchOp"
    bad = ModelGraph.from_proto(onnx.ModelProto.FromString(broken.SerializeToString()))
    with pytest.raises(InferenceError, match="^B: onnxruntime could not load the model"):
        open_sessions([(graphs[0], runtime, "A"), (bad, runtime, "B")])


# ---- import budgets (issue 34): the logic of scripts/bench_speed.py's imports part, not its timing ----
def _benchlib():  # type: ignore[no-untyped-def]
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    import benchlib

    return benchlib


def test_importtime_lines_are_attributed_to_their_top_level_package() -> None:
    benchlib = _benchlib()
    text = ("import time: self [us] | cumulative | imported package\n"
            "import time:       100 |        100 |     numpy._core\n"
            "import time:    700000 |     700000 |     ml_dtypes._ml_dtypes_ext\n"
            "import time:      2000 |     702100 |   ml_dtypes\n"
            "import time:      3000 |     705100 | onnx\n"
            "some other stderr line\n")
    rows = benchlib.parse_importtime(text)
    assert [(r["name"], r["depth"], r["cumulative_us"]) for r in rows] == [
        ("numpy._core", 2, 100), ("ml_dtypes._ml_dtypes_ext", 2, 700000), ("ml_dtypes", 1, 702100), ("onnx", 0, 705100)]
    by_package = benchlib.import_seconds_by_package(rows)
    assert by_package == pytest.approx({"total": 0.7051, "numpy": 0.0001, "ml_dtypes": 0.702, "onnx": 0.003})


def test_only_a_module_past_its_budget_is_flagged() -> None:
    benchlib = _benchlib()
    lines = benchlib.over_budget({"onnx": 1.004, "numpy": 0.2, "unbudgeted": 9.0}, {"onnx": 0.55, "numpy": 0.2})
    assert lines == ["IMPORT OVER BUDGET onnx: 1004 ms > 550 ms"]  # numpy at its budget exactly is not over


def test_docs_list_the_budgets_the_script_checks() -> None:
    from pathlib import Path

    benchlib = _benchlib()
    text = (Path(__file__).resolve().parents[1] / "docs" / "speed.md").read_text()
    for module, seconds in benchlib.IMPORT_BUDGETS.items():
        assert f"| `{module}` | {seconds * 1000:.0f} ms |" in text, module
