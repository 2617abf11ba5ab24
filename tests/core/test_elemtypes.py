"""core/elemtypes.py: the element types numpy lacks, packed and unpacked exactly as ONNX stores them, fed
to onnxruntime and read back value for value (issue 42)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from inspector_cli.core import elemtypes
from inspector_cli.core.types import TensorInfo, onnx_dtype_name
from inspector_cli.diff.values import layout, reduce_values

PACKED = [(TensorProto.INT4, ml_dtypes.int4, [-8, -1, 0, 3, 7]), (TensorProto.UINT4, ml_dtypes.uint4, [0, 1, 9, 15, 4]),
          (26, ml_dtypes.int2, [-2, -1, 0, 1, 1, -2, 0]), (25, ml_dtypes.uint2, [0, 1, 2, 3, 3, 2, 1]),
          (23, ml_dtypes.float4_e2m1fn, [0.5, -6.0, 1.5, 0.0, 3.0])]


@pytest.mark.parametrize("elem, dtype, values", PACKED)
def test_packing_is_onnx_own(elem: int, dtype: type, values: list) -> None:
    """pack() writes the bytes onnx's numpy_helper writes, and unpack() reads them back (odd counts too)."""
    array = np.array(values, dtype=np.float32).astype(dtype)
    onnx_bytes = np.frombuffer(numpy_helper.from_array(array).raw_data, np.uint8)
    packed = elemtypes.pack(array, elemtypes.PACKED_BITS[elem])
    assert packed.tolist() == onnx_bytes.tolist()
    codes = elemtypes.unpack(packed, elemtypes.PACKED_BITS[elem], len(values))
    assert codes.view(dtype).astype(np.float64).tolist() == [float(v) for v in values]


def _identity_session(elem: int, opset: int = 21) -> ort.InferenceSession:
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", elem, [5])], [helper.make_tensor_value_info("y", elem, [5])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def test_int4_in_and_out_of_onnxruntime() -> None:
    """int4/uint4 (no Identity kernel): fed packed into DequantizeLinear, requantised to an int4 output."""
    for elem, values in ((TensorProto.INT4, [-8, -1, 0, 3, 7]), (TensorProto.UINT4, [0, 1, 9, 15, 4])):
        dtype = elemtypes.ml_dtype(elem)
        nodes = [helper.make_node("DequantizeLinear", ["x", "s"], ["y"]),
                 helper.make_node("QuantizeLinear", ["y", "s", "z"], ["q"])]
        graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", elem, [5])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5]),
                                   helper.make_tensor_value_info("q", elem, [5])],
                                  [helper.make_tensor("s", TensorProto.FLOAT, [], [1.0]),
                                   helper.make_tensor("z", elem, [], [0])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
        model.ir_version = 10
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        array = np.array(values, np.int8).astype(dtype)
        outputs = elemtypes.typed_outputs(session.get_outputs())
        y, q = elemtypes.run(session, ["y", "q"], {"x": array}, outputs)
        assert y.tolist() == [float(v) for v in values]
        assert q.dtype == dtype and q.astype(np.int64).tolist() == values


@pytest.mark.parametrize("elem", [16, 17, 18, 19, 20])
def test_a_value_goes_through_onnxruntime_unchanged(elem: int) -> None:
    """Fed as a typed OrtValue and read from the output's bytes: the same values come back (onnxruntime's
    plain run refuses such a feed, and returns a float8e4m3fn output as its uint8 codes)."""
    dtype = elemtypes.ml_dtype(elem)
    values = [0.5, -1.5, 2.0, 3.0, 0.0]
    array = np.array(values, np.float32).astype(dtype)
    session = _identity_session(elem)
    outputs = elemtypes.typed_outputs(session.get_outputs())
    assert outputs == {"y": elem}
    (got,) = elemtypes.run(session, ["y"], {"x": array}, outputs)
    assert got.dtype == dtype and got.astype(np.float64).tolist() == array.astype(np.float64).tolist()


def test_adopt_reads_void_items_from_npz_as_the_input_type() -> None:
    array = np.array([1.5, -2.0], ml_dtypes.bfloat16)
    void = array.view(np.dtype("V2"))  # what np.load gives for a saved bfloat16 array
    adopted = elemtypes.adopt(void, TensorProto.BFLOAT16)
    assert adopted is not None and adopted.dtype == np.dtype(ml_dtypes.bfloat16) and adopted.tolist() == [1.5, -2.0]
    assert elemtypes.adopt(np.zeros(2, np.float16), TensorProto.BFLOAT16) is None  # another type: named by the caller


def test_metrics_are_computed_from_the_values_not_the_codes() -> None:
    """0.46875 vs 0.5 in float8e4m3fn: max abs 0.03125 (the codes 47 and 48 would read 1); the JSON label is
    ONNX's name of the type."""
    a = np.array([0.46875, 1.0], ml_dtypes.float8_e4m3fn)
    b = np.array([0.5, 1.0], ml_dtypes.float8_e4m3fn)
    stats = reduce_values(a, b)
    assert stats is not None and stats.max_abs == 0.03125 and stats.count == 2
    assert layout(a).dtype == "float8e4m3fn" and onnx_dtype_name(26) == "int2"


def test_synthetic_samples_of_these_types(tmp_path) -> None:
    from inspector_cli.core.synthetic import SyntheticSpec, generate_sample

    specs = (TensorInfo("a", TensorProto.BFLOAT16, (2, 3)), TensorInfo("b", TensorProto.INT4, (6,)),
             TensorInfo("c", 26, (4,)), TensorInfo("d", TensorProto.FLOAT8E5M2, (3,)))
    spec = SyntheticSpec(specs=specs, val_ranges=(("d", -2.0, 2.0),))
    spec.check(specs)
    sample = generate_sample(spec, 0)
    assert [str(v.dtype) for v in sample.values()] == ["bfloat16", "int4", "int2", "float8_e5m2"]
    ints = sample["b"].astype(np.int64)
    assert ints.min() >= 0 and ints.max() <= 7  # the default 0..10 clipped to int4's range
    assert -2 <= sample["c"].astype(np.int64).min() and sample["c"].astype(np.int64).max() <= 1
    assert np.all(np.abs(sample["d"].astype(np.float64)) <= 2.0)


@pytest.mark.parametrize("elem, values", [(24, [0.25, 1.0, 8.0, 0.5, 64.0]), (25, [0, 1, 2, 3, 1]), (26, [-2, -1, 0, 1, 1])])
def test_float8e8m0_and_2_bit_types_through_cast(elem: int, values: list) -> None:
    """float8e8m0, uint2 and int2 (opset 25 Cast: onnxruntime 1.32 runs these, not float4e2m1): an output of
    the type read from its bytes, and a feed of it, give the values back."""
    dtype = elemtypes.ml_dtype(elem)
    vi = helper.make_tensor_value_info
    out_graph = helper.make_graph([helper.make_node("Cast", ["x"], ["y"], to=elem)], "g",
                                  [vi("x", TensorProto.FLOAT, [5])], [vi("y", elem, [5])])
    in_graph = helper.make_graph([helper.make_node("Cast", ["y"], ["x"], to=TensorProto.FLOAT)], "g",
                                 [vi("y", elem, [5])], [vi("x", TensorProto.FLOAT, [5])])
    sessions = []
    for graph in (out_graph, in_graph):
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)])
        model.ir_version = 11
        sessions.append(ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]))
    floats = np.array(values, np.float32)
    (got,) = elemtypes.run(sessions[0], ["y"], {"x": floats}, elemtypes.typed_outputs(sessions[0].get_outputs()))
    assert got.dtype == dtype and got.astype(np.float64).tolist() == [float(v) for v in values]
    (back,) = elemtypes.run(sessions[1], ["x"], {"y": got}, {})
    assert back.tolist() == [float(v) for v in values]


def test_a_missing_ml_dtypes_is_a_one_line_usage_error(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Without ml_dtypes (a broken install), a bfloat16 value is a usage error naming the fix, not an ImportError."""
    import sys

    import pytest

    from inspector_cli.core.elemtypes import ml_dtype
    from inspector_cli.errors import UsageError

    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # `import ml_dtypes` raises ImportError
    with pytest.raises(UsageError) as raised:
        ml_dtype(16)  # ONNX BFLOAT16
    assert "need ml_dtypes" in str(raised.value) and raised.value.hint == "pip install 'ml_dtypes>=0.5,<0.7'"
