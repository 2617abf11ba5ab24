from __future__ import annotations

import json
import platform

import numpy as np

from inspector_cli.core.fingerprint import (
    diff_fingerprints,
    read_cpuinfo,
    run_fingerprint,
)

CPUINFO = """processor\t: 0
model name\t: Test CPU 9000
flags\t\t: fpu sse4_2 avx avx2 fma avx512f avx512_vnni
processor\t: 1
model name\t: Test CPU 9000
flags\t\t: fpu
"""


def test_cpuinfo_flags_of_first_cpu(tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text(CPUINFO)
    info = read_cpuinfo(path)
    assert info == {"model": "Test CPU 9000", "flags": ["sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_vnni"]}


def test_fingerprint_is_json_and_names_versions(tmp_path):
    import onnxruntime

    path = tmp_path / "cpuinfo"
    path.write_text(CPUINFO)
    fp = run_fingerprint(intra_op_threads=2, cpuinfo_path=path)
    json.dumps(fp)  # JSON-ready, no numpy or other objects
    assert fp["onnxruntime"]["version"] == onnxruntime.__version__
    assert "CPUExecutionProvider" in fp["onnxruntime"]["providers"]
    assert fp["numpy"] == np.__version__
    assert fp["python"] == platform.python_version()
    assert fp["threads"]["intra_op"] == 2
    assert "avx512_vnni" in fp["cpu"]["flags"]


def test_diff_names_changed_leaves():
    old = {"onnxruntime": {"version": "1.17.0", "providers": ["CPU"]}, "numpy": "1.26"}
    new = {"onnxruntime": {"version": "1.18.0", "providers": ["CPU"]}, "numpy": "1.26"}
    assert diff_fingerprints(old, new) == [{"key": "onnxruntime.version", "old": "1.17.0", "new": "1.18.0"}]
