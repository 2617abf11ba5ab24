"""Loading models with their weights left in the file, and running them from there."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort

from inspector_cli.core.lazyload import MIN_EXTERNAL_BYTES, load_model_lazy, stripped_model_bytes
from inspector_cli.core.runner import open_session
from inspector_cli.core.weights import initializer_array
from inspector_cli.testing.models import build_cnn, image_samples

from ..fixtures.helpers import save


def test_weights_become_references_into_the_file_and_run_identically(tmp_path):
    model = build_cnn(seed=3, channels=(64, 128), softmax=False)
    path = save(model, tmp_path / "m.onnx")
    assert path.stat().st_size > (1 << 20)
    graph = load_model_lazy(path)
    external = [t for t in graph.model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    inline = [t for t in graph.model.graph.initializer if t.data_location != onnx.TensorProto.EXTERNAL]
    assert external and all({e.key: e.value for e in t.external_data}["location"] == "m.onnx" for t in external)
    assert all(t.ByteSize() < MIN_EXTERNAL_BYTES + 200 for t in inline)
    assert graph.model.ByteSize() < path.stat().st_size / 50
    original = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    for tensor in external[:5]:
        np.testing.assert_array_equal(initializer_array(graph, tensor), original[tensor.name])
    feeds = image_samples(1, seed=1)[0]
    expected = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    got = open_session(graph, extra_outputs=["relu_3_out"]).run(feeds)
    np.testing.assert_array_equal(got["logits"], expected)
    assert got["relu_3_out"].shape == (1, 64, 32, 32)


def test_small_or_broken_files_use_the_ordinary_loader(tmp_path):
    small = save(build_cnn(seed=1), tmp_path / "small.onnx")
    assert all(t.data_location != onnx.TensorProto.EXTERNAL for t in load_model_lazy(small).model.graph.initializer)
    data = stripped_model_bytes(small)
    parsed = onnx.ModelProto()
    parsed.ParseFromString(data)
    assert len(parsed.graph.node) == 23  # the walk itself handles any size
