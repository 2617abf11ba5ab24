"""Computation signatures of tensor-valued and graph-list attributes, of constants stored as typed
fields, at the whole-hash size limit, and of external weights whose offset or length is missing or
past the file's end (compare/pairing/signature.py; scripts/mutation.sh pairing survivors)."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Optional, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper

from inspector_cli.compare.pairing.signature import FULL_HASH_BYTES, Signatures, tensor_digest
from inspector_cli.core.graph import ModelGraph

from ...fixtures.helpers import init, make_model, vi


def signed(node: onnx.NodeProto, opset: int = 17) -> Signatures:
    """Signatures of a one-node model reading x, its output y."""
    model = make_model([node], [vi("x", [2])], [vi("y", None)])
    if node.domain:
        model.opset_import.append(helper.make_opsetid(node.domain, 1))
    return Signatures(ModelGraph.from_proto(model), {"x": "x"})


def constant(values: Sequence[float]) -> Signatures:
    return signed(helper.make_node("Constant", [], ["y"], name="c",
                                   value=helper.make_tensor("v", TensorProto.FLOAT, [len(values)], list(values))))


def test_a_constant_nodes_value_is_part_of_its_signature() -> None:
    one = constant([1.0, 2.0])
    assert one.of["y"] == constant([1.0, 2.0]).of["y"]
    assert one.of["y"] != constant([1.0, 3.0]).of["y"]
    assert one.of["y"] not in one.inexact  # small: hashed whole


def test_a_plain_attribute_is_exact() -> None:
    softmax = signed(helper.make_node("Softmax", ["x"], ["y"], name="s", axis=0))
    assert softmax.of["y"] not in softmax.inexact


def custom(**attrs: object) -> Signatures:
    return signed(helper.make_node("Custom", ["x"], ["y"], name="c", domain="test.custom", **attrs))


def small(values: Sequence[float], name: str = "t") -> onnx.TensorProto:
    return helper.make_tensor(name, TensorProto.FLOAT, [len(values)], list(values))


def branch(op: str) -> onnx.GraphProto:
    return helper.make_graph([helper.make_node(op, ["x"], ["b"])], "branch", [], [vi("b", [2])])


def test_a_list_of_tensors_is_signed_by_every_tensor() -> None:
    reference = custom(tensors=[small([1.0]), small([2.0])])
    assert reference.of["y"] == custom(tensors=[small([1.0]), small([2.0])]).of["y"]
    assert reference.of["y"] != custom(tensors=[small([1.0]), small([5.0])]).of["y"]
    assert reference.of["y"] not in reference.inexact
    # a sampled tensor in the list makes the signature inexact
    big = helper.make_tensor("big", TensorProto.FLOAT, [2048], np.arange(2048, dtype=np.float32).tolist())
    assert custom(tensors=[small([1.0]), big]).of["y"] in custom(tensors=[small([1.0]), big]).inexact


def test_a_list_of_graphs_is_signed_by_every_graph() -> None:
    reference = custom(graphs=[branch("Relu"), branch("Neg")])
    assert reference.of["y"] == custom(graphs=[branch("Relu"), branch("Neg")]).of["y"]
    assert reference.of["y"] != custom(graphs=[branch("Relu"), branch("Exp")]).of["y"]
    assert reference.of["y"] not in reference.inexact


def test_a_constant_in_typed_fields_is_signed_as_its_raw_bytes() -> None:
    values = [1.0, 2.0, 3.0]
    typed = helper.make_tensor("c", TensorProto.FLOAT, [3], values)  # float_data, no raw_data
    raw = helper.make_tensor("c", TensorProto.FLOAT, [3], np.array(values, np.float32).tobytes(), raw=True)
    assert not typed.raw_data and raw.raw_data
    assert tensor_digest(typed) == tensor_digest(raw) == (hash(("const", (TensorProto.FLOAT, (3,)),
                                                                 np.array(values, np.float32).tobytes())), True)
    assert tensor_digest(helper.make_tensor("c", TensorProto.FLOAT, [3], [1.0, 2.0, 4.0]))[0] != tensor_digest(typed)[0]


def test_a_constant_of_exactly_the_limit_is_sampled() -> None:
    at_limit = onnx.numpy_helper.from_array(np.zeros(FULL_HASH_BYTES // 4, np.float32), "c")
    below = onnx.numpy_helper.from_array(np.zeros(FULL_HASH_BYTES // 4 - 1, np.float32), "c")
    assert tensor_digest(at_limit)[1] is False
    assert tensor_digest(below)[1] is True


VALUES = np.arange(2048, dtype=np.float32)


def external(tmp_path: Path, info: Dict[str, Optional[str]]) -> int:
    """The signature of a 2048-float weight stored in w.bin (which holds VALUES), with the given
    external-data keys (None: the key left out)."""
    (tmp_path / "w.bin").write_bytes(VALUES.tobytes())
    weight = init("w", VALUES)
    weight.ClearField("raw_data")
    weight.data_location = TensorProto.EXTERNAL
    for key, value in info.items():
        if value is not None:
            weight.external_data.add(key=key, value=value)
    model = make_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [vi("x", [2048])],
                       [vi("y", [2048])], [weight])
    return Signatures(ModelGraph.from_proto(model, tmp_path / "m.onnx"), {"x": "x"}).of["w"]


SHAPE_ONLY = hash(("external", (TensorProto.FLOAT, (2048,))))


def test_a_missing_offset_means_the_start_of_the_file(tmp_path: Path) -> None:
    in_memory = tensor_digest(init("w", VALUES))[0]
    assert external(tmp_path, {"location": "w.bin", "length": str(VALUES.nbytes)}) == in_memory
    assert external(tmp_path, {"location": "w.bin", "offset": "0", "length": str(VALUES.nbytes)}) == in_memory


def test_a_missing_length_or_one_past_the_file_signs_by_type_and_shape(tmp_path: Path) -> None:
    assert external(tmp_path, {"location": "w.bin", "offset": "0"}) == SHAPE_ONLY
    # 16 bytes from the end, a full length: past the file (offset - length would fit)
    assert external(tmp_path, {"location": "w.bin", "offset": str(VALUES.nbytes - 16),
                               "length": str(VALUES.nbytes)}) == SHAPE_ONLY
