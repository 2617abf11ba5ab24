"""`mi validate` speaks for onnxruntime on the whole zoo (issue 41): no error on a model plain onnxruntime
loads and runs (a false positive: a CI gate failing on a sound model), and an error on every model it
refuses (the refused members: test_sweep's `assert_refused`). `mi validate V` runs alone (no --against:
the structure and weight rules compare two models, not the model's soundness). A NaN copy's MI407 is a
true defect (a weight holding NaN), so its only errors must be MI407."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from .sweep import NAN_VARIANTS
from .test_sweep import CASES, _case, _fact

pytestmark = pytest.mark.zoo


def _runs_in_onnxruntime(model_path: Path, data: Path) -> None:
    """Plain onnxruntime loads the model and runs its first sample (inputs cast to the model's types)."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    with np.load(sorted(data.glob("*.npz"))[0], allow_pickle=False) as sample:
        feeds = {}
        for arg in session.get_inputs():
            value = sample[arg.name]
            feeds[arg.name] = value.astype(np.float16) if arg.type == "tensor(float16)" else value
    session.run(None, feeds)


@pytest.mark.parametrize("model,variant", CASES)
def test_validate_reports_no_error_where_onnxruntime_runs(request, sweep, model, variant):
    _case(request, sweep, "validate-view", model, variant)
    path = sweep.path(model, variant)
    _runs_in_onnxruntime(path, sweep.data(model, variant))
    run = sweep.mi(model, variant, "validate-alone", ["validate", path], html=False)
    assert run.json_path and not run.traceback, f"exit {run.rc}: {run.stderr_tail[-300:]}"
    findings = json.loads(Path(run.json_path).read_text())["results"]["findings"]
    errors = [f"{f['rule']} {f.get('node') or f.get('tensor') or ''}: {f['message'][:160]}" for f in findings
              if f["severity"] == "error"]
    disputed = [f["rule"] for f in findings if (f.get("data") or {}).get("checker") == "rejects"]
    _fact(sweep, model, variant, validate_errors=len(errors), validate_disputed=disputed)
    if variant in NAN_VARIANTS:  # the injected NaN weight: a real defect, the only error
        assert errors and all(e.startswith("MI407") for e in errors), errors
        return
    assert run.rc == 0 and not errors, f"{len(errors)} error(s) on a model onnxruntime runs:\n" + "\n".join(errors)
