from __future__ import annotations

import json
import platform

import numpy as np

from inspector_cli.core.fingerprint import (
    diff_fingerprints,
    read_cpuinfo,
    run_fingerprint,
    u8s8_saturates,
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


def test_u8s8_saturates_on_avx2_and_avx512_without_vnni_only(tmp_path):
    """MLAS's dispatch by CPU flags: VPMADDUBSW (int16 sums) on AVX2 and AVX-512 without VNNI; int32 dot
    products with AVX-VNNI, AVX-512 VNNI or AMX; 16-bit widening without AVX2; ARM's own dot products."""
    assert u8s8_saturates(["sse4_2", "avx", "avx2", "fma", "f16c"])  # this project's CI machine (AMD EPYC, Zen 3)
    assert u8s8_saturates(["avx2", "fma", "avx512f", "avx512bw"])  # Skylake-SP: AVX-512 without VNNI
    assert not u8s8_saturates(["avx2", "avx_vnni"])  # Alder Lake
    assert not u8s8_saturates(["avx2", "avx512f", "avx512bw", "avx512_vnni"])  # Cascade Lake, Ice Lake, Zen 4
    assert not u8s8_saturates(["avx2", "amx_int8"])
    assert not u8s8_saturates(["sse4_2", "avx"])  # Sandy Bridge: no AVX2 kernels
    assert not u8s8_saturates(["asimd", "asimddp", "i8mm"])  # ARM
    assert not u8s8_saturates([])  # unknown (no /proc/cpuinfo): no claim
    path = tmp_path / "cpuinfo"
    path.write_text(CPUINFO)
    assert not u8s8_saturates(read_cpuinfo(path)["flags"])  # AVX-512 VNNI


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
