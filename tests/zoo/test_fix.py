"""`mi fix` on every quantised variant of the zoo, from the installed wheel (issue 44): exit 0 or 1, never 4 nor
a traceback; the plan found at the halfway target (the fallback plan's); the written model meeting it alone;
the exported onnxruntime options rebuilt by the zoo's own recipe within 2e-3 of the plan; on the CNNs, no float
node where a 16-bit or per-channel remedy meets the target (each float node tried both ways, rebuilt by the
recipe). The fast subset (CI) plans on qdq_u8u8 and qop; MI_ZOO=full on every int8 QDQ, QOperator and fp16
variant (fp16 from the venv with the `fp16` extra)."""
from __future__ import annotations

from pathlib import Path

import pytest

from . import features as F
from . import fix_checks as X
from .conftest import FULL
from .test_features import RECHECK_SLACK
from .test_features import REPRODUCE_TOL as REBUILD_TOL
from .test_sweep import CASES, _case, _fact

pytestmark = pytest.mark.zoo
FIX_FAST = ("qdq_u8u8", "qop")
FIX_CASES = [(m, v) for m, v in CASES if v in X.FIX_VARIANTS and (FULL or v in FIX_FAST)]


def _fix(request, sweep, check, model, variant):
    _case(request, sweep, check, model, variant)
    run, target = X.fix(sweep, model, variant)
    return run, target, X.result(run)


@pytest.mark.parametrize("model,variant", FIX_CASES)
def test_fix_plan(request, sweep, model, variant):
    run, target, plan = _fix(request, sweep, "fix", model, variant)
    cost = plan.get("cost") or {}
    _fact(sweep, model, variant, fix_target=target, fix_found=plan.get("found"), fix_cost=cost,
          fix_strategy=plan.get("strategy"), fix_seconds=run.seconds)
    assert not run.traceback and run.rc != 4, run.stderr_tail[-400:]
    if variant == "qop" and run.rc == 2:  # a pure QOperator model: the one-line refusal
        errors = [line for line in run.stderr_tail.splitlines() if line.strip()]
        assert len(errors) == 1 and "QOperator" in errors[0], run.stderr_tail[-400:]
        return
    assert run.rc in (0, 1), f"exit {run.rc}: {run.stderr_tail[-400:]}"
    if variant != "qop":
        assert plan.get("found"), (f"no plan for cosine>={target}: baseline {plan.get('baseline')}, best "
                                   f"{plan.get('final')}, cost {cost}")


@pytest.mark.parametrize("model,variant", FIX_CASES)
def test_fix_written_model_alone(request, sweep, model, variant, tmp_path):
    run, target, plan = _fix(request, sweep, "fix-written", model, variant)
    if run.rc == 2 and variant == "qop":
        pytest.skip("refused: a pure QOperator model")
    written = plan.get("written_model")
    assert written, f"no model written (exit {run.rc}): {run.stderr_tail[-300:]}"
    cosine = F.recheck_alone(sweep, model, Path(written), tmp_path / "elsewhere")
    mine = next(iter((plan.get("recheck") or {}).values()), None)
    _fact(sweep, model, variant, fix_recheck=cosine)
    assert mine is not None and abs(cosine - mine) <= 1e-4, f"alone {cosine}, mi's re-check {mine}"
    if plan.get("found"):
        assert cosine >= target - RECHECK_SLACK, f"written model alone: {cosine} < target {target}"


@pytest.mark.parametrize("model,variant", [c for c in FIX_CASES if c[1] in X.RECIPES])
def test_fix_exports_rebuild(request, sweep, model, variant, tmp_path, monkeypatch):
    run, target, plan = _fix(request, sweep, "fix-exports", model, variant)
    ort = (plan.get("exports") or {}).get("onnxruntime")
    assert ort is not None, f"no exports (exit {run.rc}): {run.stderr_tail[-300:]}"
    monkeypatch.chdir(tmp_path)  # onnxruntime's quantiser leaves temporary files in the working folder
    cosine = X.rebuild_with_exports(sweep, model, variant, ort, tmp_path / "rebuilt.onnx")
    planned = next(iter(plan["final"].values()))
    _fact(sweep, model, variant, fix_rebuilt=cosine, fix_rebuilt_delta=cosine - planned)
    assert abs(cosine - planned) <= REBUILD_TOL, f"rebuilt {cosine:.7f}, plan {planned:.7f}"


@pytest.mark.parametrize("model,variant", [c for c in FIX_CASES if c[0] in X.CNN_MODELS and c[1] in X.RECIPES])
def test_fix_no_float_where_cheaper_would_do(request, sweep, model, variant, tmp_path, monkeypatch):
    _run, target, plan = _fix(request, sweep, "fix-cheapest", model, variant)
    if not plan.get("found"):
        pytest.skip("no plan")
    monkeypatch.chdir(tmp_path)
    cheaper = X.cheaper_would_do(sweep, model, variant, plan, target, tmp_path)
    assert not cheaper, "; ".join(cheaper)
