"""The baselines of scripts/bench_sample_cost.py (`--baselines`): what they read, counted independently."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

ROOT = Path(__file__).resolve().parent.parent


def _work_module():
    spec = importlib.util.spec_from_file_location("bench_speed_work", ROOT / "scripts" / "bench_speed_work.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_speed_work", module)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _float_values_of_every_node_output(path: Path, feeds: dict) -> int:
    model = onnx.load(str(path))
    names = [o for n in model.graph.node for o in n.output if o]
    present = {o.name for o in model.graph.output}
    model.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names if n not in present)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, feeds)
    return sum(v.size for v in got if isinstance(v, np.ndarray) and v.dtype.kind == "f")


def test_exposed_read_sums_every_float_tensor_of_every_model_on_every_sample(cnn_pair) -> None:
    fp32, int8, data = cnn_pair
    read = _work_module().exposed_read(str(fp32), str(int8), str(data))
    samples = sorted(data.glob("*.npz"))
    expected = 0
    for sample in samples:
        with np.load(sample, allow_pickle=False) as archive:
            feeds = {k: archive[k] for k in archive.files}
        expected += _float_values_of_every_node_output(fp32, feeds) + _float_values_of_every_node_output(int8, feeds)
    assert len(samples) == 6
    assert read == expected > 0
