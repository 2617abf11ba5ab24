#!/usr/bin/env python3
"""NNCF's side of scripts/bench_fix.py, run by the Python of a venv where NNCF is installed:

    NNCF_PYTHON scripts/bench_fix_nncf.py FOLDER MAX_DROP
    NNCF_PYTHON scripts/bench_fix_nncf.py FOLDER --rebuild EXPORT.json OUT.onnx

FOLDER holds fp32.onnx, calib/*.npz, val/*.npz and metric.json ({"kind": "labels", "labels": {...}} or
{"kind": "agreement", "reference": {...}}: fp32's top-1 class per validation sample). Writes nncf_int8.onnx
(nncf.quantize) and nncf_ac.onnx (nncf.quantize_with_accuracy_control, ONNX backend, max_drop absolute),
and prints one JSON line: the seconds of each, the metric NNCF's validation function read.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np


def load(folder: Path):
    return [(p.name, dict(np.load(p))) for p in sorted(folder.glob("*.npz"))]


def rebuild(folder: Path, export: Path, out: Path) -> None:
    """nncf.quantize of fp32.onnx on calib/ again, with the IgnoredScope `mi fix --export` wrote (the names of
    the nodes it keeps in float): the check that the exported scope gives the plan's model."""
    import nncf
    import onnx

    scope = json.loads(export.read_text())["nncf"]
    calib = load(folder / "calib")
    model = nncf.quantize(onnx.load(str(folder / "fp32.onnx")), nncf.Dataset(calib, lambda item: item[1]),
                          subset_size=len(calib), ignored_scope=nncf.IgnoredScope(names=scope["names"]))
    onnx.save(model, str(out))
    print(json.dumps({"rebuilt": str(out), "ignored": len(scope["names"])}))


def main() -> None:
    import nncf
    import onnx
    import onnxruntime as ort

    if sys.argv[2] == "--rebuild":
        rebuild(Path(sys.argv[1]), Path(sys.argv[3]), Path(sys.argv[4]))
        return
    folder, max_drop = Path(sys.argv[1]), float(sys.argv[2])
    fp32 = onnx.load(str(folder / "fp32.onnx"))
    metric = json.loads((folder / "metric.json").read_text())
    calib, val = load(folder / "calib"), load(folder / "val")
    output = metric["output"]

    def validate(model, items) -> float:
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        right = []
        for name, feeds in items:
            scores = session.run([output], feeds)[0].reshape(-1)
            wanted = metric["labels" if metric["kind"] == "labels" else "reference"][name]
            right.append(int(np.argmax(scores)) == int(wanted))
        return float(np.mean(right))

    calibration = nncf.Dataset(calib, lambda item: item[1])
    validation = nncf.Dataset(val, lambda item: item[1])
    start = time.perf_counter()
    int8 = nncf.quantize(fp32, calibration, subset_size=len(calib))
    plain_s = time.perf_counter() - start
    onnx.save(int8, str(folder / "nncf_int8.onnx"))
    start = time.perf_counter()
    controlled = nncf.quantize_with_accuracy_control(
        fp32, calibration, validation, validation_fn=validate, max_drop=max_drop, drop_type=nncf.DropType.ABSOLUTE,
        subset_size=len(calib))
    ac_s = time.perf_counter() - start
    onnx.save(controlled, str(folder / "nncf_ac.onnx"))
    print(json.dumps({"nncf": nncf.__version__, "quantize_s": plain_s, "accuracy_control_s": ac_s,
                      "fp32_metric": validate(fp32, val), "int8_metric": validate(int8, val),
                      "ac_metric": validate(controlled, val)}))


if __name__ == "__main__":
    main()
