"""The ONNX backend test data as a sweep (issue 42): every case through compare --golden, validate, probe,
nan-bisect, profile and inspect, with mi from the wheel in a core-only venv, held against the independent
truth (plain onnxruntime + numpy, onnx's rtol/atol: scripts/conformance/truth.py).

By default a fast subset: the node cases of a few ops (the value types numpy lacks, sequences and
optionals, plain arithmetic) and the shipped simple/ and pytorch-operator/ models. MI_ZOO=full or
MI_CONFORMANCE=full runs every case the installed onnx has (~2,000: all node cases, and simple/,
pytorch-operator/, pytorch-converted/ and light/). The criteria (docs/conformance.md): where onnxruntime
runs a case every command exits 0 or 1 and mi's golden verdict and max abs error equal the truth's;
where it cannot, compare says so on one line with exit 3; never exit 4, never a traceback."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

import pytest

from .wheel import CACHE, ROOT, clean_env, installed_venv

pytestmark = pytest.mark.zoo

FULL = os.environ.get("MI_ZOO", "") == "full" or os.environ.get("MI_CONFORMANCE", "") == "full"
FAST_MODULES = ("cast", "castlike", "identity", "sequenceinsert", "optionalhaselement", "quantizelinear",
                "dequantizelinear", "add", "softmax", "gemm", "attention", "reducemax", "reducemin",
                "reduce_log_sum", "reduce_log_sum_exp")
"""onnx.backend.test.case.node modules of the fast subset (each generates its op's cases when imported):
the casts hold NaN the saved outputs expect, attention's expanded cases -inf masks, the reductions'
empty-set cases their documented +-inf."""
ARTIFACTS = Path(os.environ.get("MI_ARTIFACTS", ROOT / "test-artifacts")) / ("conformance-full" if FULL else "conformance")


def _fused_attention(name: str) -> bool:
    """The fast subset takes attention's expanded cases only (the fused op's ~90 are in the full sweep)."""
    return name.startswith("test_attention") and not name.endswith("_expanded")


def _intended_nonfinite(case: str) -> bool:
    """A case whose non-finite values are the right answer when onnxruntime runs it: attention spelled out
    in plain ops (`test_attention_*_expanded`: a -inf mask constant, masked scores), a reduction over an
    empty set (`test_reduce_*_empty_set*`: its documented +-inf). probe and nan-bisect call none a fault."""
    name = case.rsplit("/", 1)[-1]
    return (name.startswith("test_attention") and name.endswith("_expanded")) or "_empty_set" in name


def _sweep_module() -> Any:
    sys.path.insert(0, str(ROOT / "scripts" / "conformance"))
    import sweep

    return sweep


@pytest.fixture(scope="module")
def conformance(mi_wheel) -> Dict[str, Any]:
    bin_dir = installed_venv(mi_wheel)
    version = subprocess.run([str(bin_dir / "python"), "-c", "import onnx; print(onnx.__version__)"],
                             capture_output=True, text=True, check=True, env=clean_env()).stdout.strip()
    script = ROOT / "scripts" / "conformance" / "backend_data.py"
    recipe = hashlib.sha256(script.read_bytes() + repr(FAST_MODULES).encode()).hexdigest()[:12]
    cases = CACHE / f"onnx-backend-{version}-{'full' if FULL else 'fast'}-{recipe}"
    if not (cases / ".complete").exists():
        modules = [] if FULL else [",".join(FAST_MODULES)]
        subprocess.run([str(bin_dir / "python"), str(script),
                        str(cases), *modules], check=True, capture_output=True, text=True, env=clean_env())
        (cases / ".complete").write_text(version)
    only = None if FULL else [f"{p.parent.parent.name}/{p.parent.name}" for p in sorted(cases.glob("*/*/case.json"))
                              if p.parent.parent.name in ("node", "simple", "pytorch-operator")
                              and not _fused_attention(p.parent.name)]
    return _sweep_module().sweep(cases, ARTIFACTS, bin_dir / "mi", 60, only, 3600.0)


def test_every_case_holds_every_criterion(conformance: Dict[str, Any]) -> None:
    """No exception: a case whose expected output holds NaN where onnxruntime's does (the truth's
    `nan_same`: casts of NaN, fmod of NaN, sqrt of negatives) is agreement, as ONNX's runner counts it."""
    assert conformance["failing"] == {}, json.dumps(conformance["failing"], indent=1)


def test_the_counts_are_those_of_a_real_sweep(conformance: Dict[str, Any]) -> None:
    """The sweep ran what it says: onnxruntime ran most cases, every one was compared, and mi's golden
    verdict and max abs error agree with the truth on every one of them, the NaN-same cases included."""
    assert conformance["cases"] >= (1800 if FULL else 150)
    assert conformance["onnxruntime_runs"] >= 0.75 * conformance["cases"]  # 80% fast, 92% full with onnxruntime 1.32
    assert conformance["golden_compared"] == conformance["onnxruntime_runs"]
    assert conformance["verdict_agree"] == conformance["golden_compared"]
    assert conformance["max_abs_agree"] == conformance["golden_compared"]
    assert len(conformance["nan_same_cases"]) >= (100 if FULL else 40)
    assert conformance["exit_codes"]["compare"].get("4", 0) == 0


def test_masks_and_empty_reductions_are_no_fault(conformance: Dict[str, Any]) -> None:
    """Where onnxruntime runs an expanded attention case or an empty-set reduction, probe and nan-bisect exit
    0: the -inf of a mask and a reduction's +-inf over an empty set are the right answer, not NaN/Inf born."""
    records = [json.loads(line) for line in (ARTIFACTS / "runs.jsonl").read_text().splitlines()]
    chosen = [r for r in records if r["truth"].get("runs") and _intended_nonfinite(r["case"])]
    assert len(chosen) >= (100 if FULL else 50)
    faults = {r["case"]: {c: r["steps"][c]["summary"][:200] for c in ("probe", "nan-bisect")
                          if r["steps"][c]["exit"] != 0} for r in chosen}
    assert {case: found for case, found in faults.items() if found} == {}
