"""core/fingerprint: package versions read from the dist-info folders, equal to importlib.metadata's."""
from __future__ import annotations

from pathlib import Path

import pytest


def test_package_versions_read_without_importlib_metadata(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib.metadata import version

    from inspector_cli.core.fingerprint import _dist_info_version

    for name in ("onnx", "numpy", "click", "PyYAML"):
        assert _dist_info_version(name) == version(name)
    # one folder first on sys.path with a dist-info of its own: it wins, as in importlib.metadata
    (tmp_path / "fake_pkg-1.2.3.dist-info").mkdir()
    (tmp_path / "fake_pkg-1.2.3.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-pkg\nVersion: 1.2.3\n\nbody\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _dist_info_version("fake-pkg") == "1.2.3"
    (tmp_path / "fake_pkg-9.dist-info").mkdir()  # two candidates: importlib.metadata decides (None here)
    assert _dist_info_version("fake-pkg") is None
