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

XDIST_GROUPS = {
    # build or read the zoo cache (~/.cache/mi-zoo) and the wheel: built once, never read half-written
    "zoo": ("tests/zoo/", "tests/compare/test_outputs_from_files.py"),
    # the private Ray instance (ray_local): one per worker would start two Ray clusters on 2 cores
    "ray": ("tests/executor/test_executor_ray.py", "tests/executor/test_scale.py",
            "tests/executor/test_scale_results.py", "tests/cli/test_configs_examples.py::test_config_runs[scale-ray.yaml]"),
}
"""Node-id prefixes of tests that share a costly or exclusive resource: each group runs on one worker."""


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):  # type: ignore[no-untyped-def]
    """Under pytest-xdist (`scripts/test.sh` runs `-n 2`): whole test files go to one worker each (as
    --dist loadscope), and each of XDIST_GROUPS to one worker. (xdist's own `--dist loadgroup` reads
    xdist_group marks into node ids, which pytest 9 no longer lets it change: it silently spread them.)"""
    from xdist.scheduler import LoadScopeScheduling

    class GroupedScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            for group, prefixes in XDIST_GROUPS.items():
                if nodeid.startswith(prefixes):
                    return f"group:{group}"
            return super()._split_scope(nodeid)

    return GroupedScheduling(config, log)


@pytest.fixture
def busy_machine():  # type: ignore[no-untyped-def]
    """`MI_TEST_BUSY_PER_CORE` (default 1) CPU-bound processes per core while the test runs, stopped after
    it (tests/fixtures/load.py): the signal tests' deliberately busy machine (issue 40)."""
    from .fixtures.load import BUSY_PER_CORE, BUSY_SECONDS, busy_processes, cores

    with busy_processes(BUSY_PER_CORE * cores(), BUSY_SECONDS) as procs:
        yield procs


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
