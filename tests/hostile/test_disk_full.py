"""A full disk while writing reports: exit 3 naming the path and 'no space left', no partial file,
the previous report (if any) intact. On a real 64 KiB tmpfs when this process may mount one (root),
and always through a simulated ENOSPC."""
from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from inspector_cli.errors import ReportError
from inspector_cli.serialize import write_atomic

from ..fixtures.helpers import affine_model, invoke, save


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs filled to the last block; skipped where mounting is not allowed."""
    mount = tmp_path / "full"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.decode().strip()}")
    try:
        with open(mount / "filler", "wb") as handle:
            try:
                handle.write(b"\0" * (1 << 20))
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_json_and_html_on_a_full_tmpfs_exit_3_naming_the_path(full_disk: Path, tmp_path: Path) -> None:
    model = save(affine_model(), tmp_path / "m.onnx")
    target = full_disk / "r.json"
    result = invoke(["-q", "validate", model, "--json", target, "--html", full_disk / "r.html"], exit_code=3)
    assert result.stderr == f"Error: {target}: cannot write the report: no space left on device\n"
    assert sorted(p.name for p in full_disk.iterdir()) == ["filler"]  # no partial or temporary file


def test_simulated_enospc_keeps_the_previous_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = save(affine_model(), tmp_path / "m.onnx")
    target = tmp_path / "r.json"
    target.write_text("previous report\n")

    def no_space(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", no_space)
    result = invoke(["-q", "validate", model, "--json", target], exit_code=3)
    assert result.stderr == f"Error: {target}: cannot write the report: no space left on device\n"
    assert target.read_text() == "previous report\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "r.json"]


def test_write_atomic_turns_other_os_errors_into_report_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def read_only(fd: int) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(os, "fsync", read_only)
    with pytest.raises(ReportError) as caught:
        write_atomic(tmp_path / "r.json", "{}")
    assert str(caught.value) == f"{tmp_path / 'r.json'}: cannot write the report: read-only file system"
    assert ReportError.exit_code == 3


def test_enospc_outside_report_writes_is_exit_3_at_the_boundary() -> None:
    from inspector_cli.cli import run_guarded

    def jsonl_append() -> None:
        raise OSError(errno.ENOSPC, "No space left on device", "/data/run.jsonl")

    assert run_guarded(jsonl_append, debug=False) == 3


def test_nan_bisect_jsonl_on_a_full_tmpfs_names_the_log(full_disk: Path, tmp_path: Path) -> None:
    import numpy as np
    from onnx import helper

    from ..fixtures.helpers import make_model, save_npz, vi

    model = save(make_model([helper.make_node("Log", ["x"], ["y"], name="log")], [vi("x", [1, 4])],
                            [vi("y", [1, 4])]), tmp_path / "log.onnx")
    data = save_npz(tmp_path / "data", [{"x": np.ones((1, 4), np.float32)} for _ in range(64)])
    target = full_disk / "run.jsonl"
    result = invoke(["-q", "nan-bisect", model, "-i", data, "--jsonl", target], exit_code=3)
    assert result.stderr == f"Error: {target}: cannot write the JSONL log: no space left on device\n"


def test_simulated_enospc_on_the_jsonl_names_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # issue 15 item 9 for --jsonl: the path and "no space left", exit 3 (not exit 4, not a bare errno)
    import numpy as np
    from onnx import helper

    from ..fixtures.helpers import make_model, save_npz, vi

    model = save(make_model([helper.make_node("Log", ["x"], ["y"], name="log")], [vi("x", [1, 4])],
                            [vi("y", [1, 4])]), tmp_path / "log.onnx")
    data = save_npz(tmp_path / "data", [{"x": np.ones((1, 4), np.float32)}])
    target = tmp_path / "run.jsonl"

    def no_space(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", no_space)
    result = invoke(["-q", "nan-bisect", model, "-i", data, "--jsonl", target], exit_code=3)
    assert result.stderr == f"Error: {target}: cannot write the JSONL log: no space left on device\n"
