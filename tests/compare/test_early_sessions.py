"""Outputs-only compare builds both sessions while the graphs load (compare/batch.early_sessions), but
never for a model that may name external data: onnxruntime would read those files before mi's
external-data check (inside the model's folder, no links out) has passed."""
from __future__ import annotations

from pathlib import Path

import onnx

from inspector_cli.compare.batch import early_sessions, may_reference_external_data
from inspector_cli.compare.config import CompareConfig, LayerConfig

from ..fixtures.helpers import affine_model, save


def _with_external_weights(folder: Path) -> Path:
    path = folder / "ext.onnx"  # every initializer in ext.bin, tiny ones too (threshold 0 bytes)
    onnx.save(affine_model(2.0, 1.0), path, save_as_external_data=True, all_tensors_to_one_file=True, location="ext.bin",
              size_threshold=0)
    return path


def test_a_plain_model_has_no_external_data_and_starts_early(tmp_path) -> None:  # type: ignore[no-untyped-def]
    plain = save(affine_model(2.0, 1.0), tmp_path / "plain.onnx")
    assert not may_reference_external_data(plain)
    early = early_sessions(plain, plain, CompareConfig())
    assert early is not None
    sessions = early.result()
    assert sessions is not None and len(sessions) == 2


def test_external_data_or_layers_never_start_early(tmp_path) -> None:  # type: ignore[no-untyped-def]
    plain = save(affine_model(2.0, 1.0), tmp_path / "plain.onnx")
    external = _with_external_weights(tmp_path)
    assert may_reference_external_data(external) and (tmp_path / "ext.bin").exists()
    assert early_sessions(plain, external, CompareConfig()) is None
    assert early_sessions(external, plain, CompareConfig()) is None
    assert early_sessions(plain, plain, CompareConfig(layers=LayerConfig())) is None
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    assert not may_reference_external_data(empty)
