"""Session-wide fixtures: real model pairs are built once per test run."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Tuple

import pytest

from inspector_cli.cli import one_blas_thread

# as `mi` runs: in-process results (CliRunner, the API) then agree to the bit with `mi` in a subprocess
one_blas_thread()
# pytest-xdist sets COLUMNS=80 (and LINES) in its workers; mi fits its output to COLUMNS off a terminal, so
# every test would see another width than in one process. Tests that need a width set it themselves.
for _variable in ("COLUMNS", "LINES"):
    os.environ.pop(_variable, None)

ZOO_GROUP_FILES = ("tests/zoo/", "tests/compare/test_outputs_from_files.py")
"""Tests that build or read the zoo cache (~/.cache/mi-zoo) and the wheel: one worker, so the zoo is built
once and never read half-written."""


def pytest_collection_modifyitems(config, items) -> None:  # type: ignore[no-untyped-def]
    """Under pytest-xdist (`scripts/test.sh` runs `-n 2 --dist loadgroup`), tests sharing a costly or
    exclusive resource run on one worker: the zoo and its wheel, and the private Ray instance (one per
    worker would start two Ray clusters on a 2-core machine)."""
    root = Path(str(config.rootpath))
    for item in items:
        where = Path(str(item.path)).relative_to(root).as_posix() if Path(str(item.path)).is_relative_to(root) else ""
        if where.startswith(ZOO_GROUP_FILES):
            item.add_marker(pytest.mark.xdist_group("zoo"))
        elif "ray_local" in getattr(item, "fixturenames", ()) or item.get_closest_marker("ray") is not None:
            item.add_marker(pytest.mark.xdist_group("ray"))


@pytest.fixture(scope="session")
def cnn_pair(tmp_path_factory) -> Tuple[Path, Path, Path]:
    """A ResNet-style fp32 CNN, its int8 QDQ quantisation (quantize_static), and 6 samples."""
    from inspector_cli.testing.models import build_pair, image_samples, save_samples

    folder = tmp_path_factory.mktemp("cnn")
    fp32, int8 = build_pair(folder, softmax=False, calibration_count=16)
    save_samples(image_samples(6, seed=11), folder / "data")
    return fp32, int8, folder / "data"


@pytest.fixture(scope="session")
def ray_local():
    """A private Ray instance for the whole test run: 2 CPUs, loopback only, no dashboard, no usage
    statistics, logs in a temporary folder; stopped (and its folder removed) at the end. Executors
    created meanwhile find Ray initialised and use this instance."""
    pytest.importorskip("ray")
    from inspector_cli.executor.connection import RayConnection

    connection = RayConnection("local", cpus=2)
    connection.connect()
    try:
        yield connection
    finally:
        connection.close()
