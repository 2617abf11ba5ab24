"""The independent truth of a backend test case: plain onnxruntime and numpy against the expected outputs.

Nothing here comes from mi. The saved values are read with onnx's numpy_helper (by each graph value's
declared kind, as onnx's runner does), fed to onnxruntime as it takes them (numpy arrays, lists for
sequences; an element type numpy lacks as an OrtValue of that ONNX type), and outputs of such types
are decoded by onnx itself (their bytes put in a TensorProto and read back with numpy_helper). The
verdict is onnx's `assert_similar_outputs`: same shapes, strings equal, `assert_allclose(out, ref,
rtol, atol)` (a NaN at the same place agrees; bfloat16 gets rtol >= 2**-6). The max abs error is over
the positions finite on both sides, +inf when a NaN/Inf is not matched (the same value at the same place
on both sides is agreement).
"""
from __future__ import annotations

import ctypes
import json
import math
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np

_NUMPY_ORT = {"tensor(float)", "tensor(double)", "tensor(float16)", "tensor(int8)", "tensor(uint8)",
              "tensor(int16)", "tensor(uint16)", "tensor(int32)", "tensor(uint32)", "tensor(int64)",
              "tensor(uint64)", "tensor(bool)", "tensor(string)", "tensor(complex64)", "tensor(complex128)"}


def _read(path: Path, value_type: Any) -> Any:
    import onnx
    from onnx import numpy_helper

    for field, proto, read in (("sequence_type", onnx.SequenceProto, numpy_helper.to_list),
                               ("optional_type", onnx.OptionalProto, numpy_helper.to_optional),
                               ("map_type", onnx.MapProto, numpy_helper.to_dict)):
        if value_type.HasField(field):
            message = proto()
            message.ParseFromString(path.read_bytes())
            return read(message)
    tensor = onnx.TensorProto()
    tensor.ParseFromString(path.read_bytes())
    return numpy_helper.to_array(tensor)


def _feed(value: Any, elem_type: int, keep: List[Any]) -> Any:
    """numpy's own types as they are; bfloat16/float8/int4... as an OrtValue built from onnx's packed bytes."""
    import onnxruntime as ort
    from onnx import numpy_helper

    if not isinstance(value, np.ndarray) or value.dtype.kind in "biufcOUS" and value.dtype.name in _NUMPY_NAMES:
        return value
    raw = np.frombuffer(numpy_helper.from_array(value).raw_data, np.uint8)
    buffer = np.zeros(max(value.size, raw.size, 1), np.uint8)
    buffer[:raw.size] = raw
    buffer = buffer[:value.size].reshape(value.shape) if value.dtype.itemsize == 1 else \
        buffer[:raw.size].view(np.uint16).reshape(value.shape)
    keep.append(buffer)
    return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(buffer, elem_type)


_NUMPY_NAMES = {"float32", "float64", "float16", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
                "uint64", "bool", "complex64", "complex128", "object"}


def _decode(value: Any, elem_type: int) -> np.ndarray:
    """An OrtValue of a type numpy lacks, decoded by onnx: its bytes as a TensorProto's raw_data."""
    from onnx import helper, numpy_helper

    size = value.tensor_size_in_bytes()
    data = (ctypes.c_uint8 * size).from_address(value.data_ptr()) if size else b""
    tensor = helper.make_tensor("t", elem_type, list(value.shape()), bytes(data), raw=True)
    return numpy_helper.to_array(tensor)


def run_case(folder: Path) -> Dict[str, Any]:
    """{'runs': bool, 'error', 'passed', 'max_abs', 'outputs': [...]} of one case folder."""
    import onnx
    import onnxruntime as ort

    meta = json.loads((folder / "case.json").read_text())
    rtol, atol = float(meta["rtol"]), float(meta["atol"])
    model = onnx.load(str(folder / "model.onnx"))
    options = ort.SessionOptions()
    options.log_severity_level = 4
    try:
        session = ort.InferenceSession(str(folder / "model.onnx"), options, providers=["CPUExecutionProvider"])
    except Exception as exc:
        return {"runs": False, "error": f"load: {str(exc).splitlines()[0][:200]}"}
    initializers = {i.name for i in model.graph.initializer}
    graph_inputs = [vi for vi in model.graph.input if vi.name not in initializers]
    out_types = {o.name: o.type for o in session.get_outputs()}
    passed, worst, outputs, nan_same = True, 0.0, [], 0
    for data in sorted(folder.glob("test_data_set_*")):
        keep: List[Any] = []
        feeds = {}
        for k, vi in enumerate(graph_inputs):
            path = data / f"input_{k}.pb"
            if path.exists():
                feeds[vi.name] = _feed(_read(path, vi.type), vi.type.tensor_type.elem_type, keep)
        names = [o.name for o in model.graph.output]
        expected = [_read(data / f"output_{k}.pb", o.type) for k, o in enumerate(model.graph.output)
                    if (data / f"output_{k}.pb").exists()]
        names = names[:len(expected)]
        try:
            if any(out_types.get(n) not in _NUMPY_ORT and out_types.get(n, "").startswith("tensor(") for n in names):
                ort_feeds = {k: v if isinstance(v, ort.OrtValue) else ort.OrtValue.ortvalue_from_numpy(v)
                             for k, v in feeds.items()}
                raw = session.run_with_ort_values(names, ort_feeds)
                elem = {o.name: o.type.tensor_type.elem_type for o in model.graph.output}
                got = [_decode(v, elem[n]) if out_types[n] not in _NUMPY_ORT else v.numpy() for n, v in zip(names, raw)]
            else:
                got = session.run(names, feeds)
        except Exception as exc:
            return {"runs": False, "error": f"run: {str(exc).splitlines()[0][:200]}"}
        for name, ref, out in zip(names, expected, got):
            ok, max_abs = similar(ref, out, rtol, atol)
            passed &= ok
            worst = max(worst, max_abs) if not math.isnan(max_abs) else worst
            nan_same += _nan_same(ref, out)
            outputs.append({"name": name, "sample": data.name, "passed": ok, "max_abs": max_abs})
    return {"runs": True, "passed": passed, "max_abs": worst, "outputs": outputs, "rtol": rtol, "atol": atol,
            "nan_same": nan_same}


def _nan_same(ref: Any, out: Any) -> int:
    """Positions where the expected and the actual value are both NaN (ONNX's runner: agreement)."""
    if isinstance(ref, (list, tuple)) and isinstance(out, (list, tuple)):
        return sum(_nan_same(r, o) for r, o in zip(ref, out))
    if not isinstance(ref, np.ndarray) or not isinstance(out, np.ndarray) or ref.shape != out.shape \
            or ref.dtype.kind in "OUSbiu" or ref.dtype.name in ("int4", "uint4", "int2", "uint2"):
        return 0
    return int((np.isnan(_widen(ref)) & np.isnan(_widen(out))).sum())


def _widen(value: np.ndarray) -> np.ndarray:
    if value.dtype.name in _NUMPY_NAMES and value.dtype.kind != "O":
        return value.astype(np.float64) if value.dtype.kind != "c" else value
    return value.astype(np.float64)  # ml_dtypes: exact in float64


def similar(ref: Any, out: Any, rtol: float, atol: float) -> "tuple[bool, float]":
    """onnx's assert_similar_outputs on one output (recursing into sequences) and the max abs error."""
    if isinstance(ref, (list, tuple)) or isinstance(out, (list, tuple)):
        if not isinstance(ref, (list, tuple)) or not isinstance(out, (list, tuple)) or len(ref) != len(out):
            return False, math.inf
        results = [similar(r, o, rtol, atol) for r, o in zip(ref, out)]
        return all(ok for ok, _ in results), max([m for _, m in results], default=0.0)
    if ref is None or out is None:
        return ref is None and out is None, 0.0
    if isinstance(ref, dict):
        return ref == out, 0.0
    ref, out = np.asarray(ref), np.asarray(out)
    if ref.shape != out.shape:
        return False, math.inf
    if ref.dtype.kind in "OUS":
        return bool(np.array_equal(ref, out)), 0.0
    if ref.dtype != out.dtype:
        return False, math.inf
    r, o = _widen(ref), _widen(out)
    tol_r = max(rtol, 2 ** -6) if ref.dtype.name == "bfloat16" else rtol
    try:
        np.testing.assert_allclose(o, r, rtol=tol_r, atol=atol)
        ok = True
    except AssertionError:
        ok = False
    if r.dtype.kind == "c":
        diff = np.abs(o - r)
        return ok, float(diff.max()) if diff.size else 0.0
    finite = np.isfinite(r) & np.isfinite(o)
    same = (np.isnan(r) & np.isnan(o)) | (np.isinf(r) & (r == o))
    if not (finite | same).all():
        return ok, math.inf
    diff = np.abs(o[finite] - r[finite])
    return ok, float(diff.max()) if diff.size else 0.0
