#!/usr/bin/env python3
"""The floors and reference scripts of bench_speed.py, and the data it needs (each run in its own process).

    python scripts/bench_speed_work.py floor A.onnx [B.onnx ...] DATA   plain inference: sessions + runs
    python scripts/bench_speed_work.py checker MODEL                    check_model(full_check=True) + one session
    python scripts/bench_speed_work.py naive A B DATA                   expose every tensor, numpy diff, streamed
    python scripts/bench_speed_work.py exposed A B DATA                 expose every tensor, no diff (inference only)
    python scripts/bench_speed_work.py exposed_read A [B] DATA          the same, then one numpy sum of each float tensor
    python scripts/bench_speed_work.py plan A B                         50k-node planning: pairing + chains (seconds)
    python scripts/bench_speed_work.py nan_data MODEL DATA OUT N BAD    N samples; BAD=1: sample N/2 overflows
    python scripts/bench_speed_work.py big NODES OUT_DIR                generated encoder (fp32 + fp16) of ~NODES nodes
    python scripts/bench_speed_work.py pick MODEL K                     K tensor names spread over the graph
    python scripts/bench_speed_work.py external OUT.onnx                MatMul chain, 4 x 48 MiB external weights

Only public tools (numpy, onnx, onnxruntime) in the floors and the naive script.
"""
from __future__ import annotations

import glob
import json
import os
import sys
import time
from pathlib import Path
from typing import Dict, List


def _feeds(data: str) -> List[str]:
    return sorted(glob.glob(os.path.join(data, "*.npz")))


def _load(path: str) -> Dict[str, object]:
    import numpy as np

    with np.load(path, allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


def floor(*args: str) -> None:
    """Plain onnxruntime inference of every model over every sample (the reference cost)."""
    import onnxruntime as ort

    *models, data = args
    sessions = [ort.InferenceSession(p, providers=["CPUExecutionProvider"]) for p in models]
    for path in _feeds(data):
        feeds = _load(path)
        for session in sessions:
            session.run(None, feeds)


def checker(model: str) -> None:
    """What `mi validate` should cost at most 1.5x of: the full checker and one session."""
    import onnx
    import onnxruntime as ort

    onnx.checker.check_model(model, full_check=True)
    ort.InferenceSession(model, providers=["CPUExecutionProvider"])


def _exposed(path: str) -> "tuple":
    """A session of the model with every float node output added as a graph output."""
    import onnx
    import onnxruntime as ort

    model = onnx.load(path)
    declared = {o.name for o in model.graph.output}
    for node in model.graph.node:
        for name in node.output:
            if name and name not in declared:
                model.graph.output.append(onnx.ValueInfoProto(name=name))
                declared.add(name)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session, [o.name for o in session.get_outputs()]


def naive(a: str, b: str, data: str) -> None:
    """The script a user writes: expose everything in both, diff same-named float tensors with numpy."""
    import numpy as np

    sa, names_a = _exposed(a)
    sb, names_b = _exposed(b)
    common = [n for n in names_a if n in set(names_b)]
    worst: Dict[str, float] = {}
    for path in _feeds(data):
        feeds = _load(path)
        out_a = dict(zip(names_a, sa.run(None, feeds)))
        out_b = dict(zip(names_b, sb.run(None, feeds)))
        for name in common:
            x, y = out_a[name], out_b[name]
            if x.shape != y.shape or x.dtype.kind != "f" or y.dtype.kind != "f":
                continue
            x, y = x.astype(np.float64).ravel(), y.astype(np.float64).ravel()
            d = y - x
            norm = float(np.sqrt((x @ x) * (y @ y)))
            cos = float(x @ y) / norm if norm else 1.0
            worst[name] = min(worst.get(name, 1.0), cos)
            float(np.abs(d).max()), float(np.sqrt(d @ d / max(d.size, 1)))
    print(json.dumps({"pairs": len(worst)}))


def exposed(*args: str) -> None:
    """Inference alone with every tensor exposed as an output (no diff): what reading every layer
    costs onnxruntime before any metric is computed (exposing a tensor keeps its node from being
    fused, e.g. DequantizeLinear -> Conv -> QuantizeLinear into QLinearConv)."""
    *models, data = args
    sessions = [_exposed(path)[0] for path in models]
    for path in _feeds(data):
        feeds = _load(path)
        for session in sessions:
            session.run(None, feeds)


def exposed_read(*args: str) -> int:
    """`exposed`, then one numpy pass (a float32 sum) over every float tensor on the calling thread: the least
    any statistic of every value reads (a memory pass), as a lower bound beside mi's several exact ones.
    Returns the number of values read."""
    import numpy as np

    *models, data = args
    sessions = [_exposed(path)[0] for path in models]
    read = 0
    for path in _feeds(data):
        feeds = _load(path)
        for session in sessions:
            for value in session.run(None, feeds):
                if isinstance(value, np.ndarray) and value.dtype.kind == "f":
                    np.add.reduce(value, axis=None)
                    read += value.size
    return read


def plan(a: str, b: str) -> None:
    """Seconds of `compare --layers all` planning: loading, output pairing, tensor pairing and chains."""
    import gc

    from inspector_cli.compare.config import CompareConfig, LayerConfig
    from inspector_cli.compare.plan import plan_comparison
    from inspector_cli.compare.layers import layer_pairs

    gc.set_threshold(10_000, 10, 10)  # as `mi` itself runs (cli.main)
    start, cpu = time.perf_counter(), time.process_time()
    config = CompareConfig(layers=LayerConfig())
    compared = plan_comparison(a, b, config)
    pairs = layer_pairs(compared, LayerConfig(), ())[3]
    print(json.dumps({"seconds": time.perf_counter() - start, "cpu_seconds": time.process_time() - cpu,
                      "pairs": len(pairs)}))


def nan_data(model: str, data: str, out: str, count: str, bad: str = "1") -> None:
    """`count` samples (the data set's, cycled); with `bad` the middle one overflows to Inf/NaN in the model."""
    import numpy as np
    import onnxruntime as ort

    n = int(count)
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    sources = _feeds(data)
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    for i in range(n):
        feeds = _load(sources[i % len(sources)])
        if bad == "1" and i == n // 2:
            for scale in (3e38, 1e38, 1e30, 1e20):
                bad = {k: np.full_like(v, scale) if v.dtype == np.float32 else v for k, v in feeds.items()}
                outs = session.run(None, bad)
                if not all(np.isfinite(o).all() for o in outs):
                    feeds = bad
                    break
            else:
                # the activations are bounded (ReLU6/Clip): a NaN in one input value is the bad sample
                feeds = {k: v.copy() for k, v in feeds.items()}
                first = next(k for k, v in feeds.items() if v.dtype == np.float32)
                feeds[first].reshape(-1)[feeds[first].size // 2] = np.nan
        np.savez(folder / f"s{i:03d}.npz", **feeds)


def big(nodes: str, out_dir: str) -> None:
    """fp32 and fp16 (keep_io_types) versions of a generated encoder of about `nodes` nodes."""
    import numpy as np
    import onnx
    from onnxconverter_common import float16

    from inspector_cli.testing.encoder import build_encoder

    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    layers = max(1, int(nodes) // 50)
    model = build_encoder(layers, hidden=32, heads=2, seq=16)
    fp32, fp16 = folder / f"big{nodes}_fp32.onnx", folder / f"big{nodes}_fp16.onnx"
    onnx.save(model, str(fp32))
    onnx.save(float16.convert_float_to_float16(model, keep_io_types=True), str(fp16))
    data = folder / f"big{nodes}_data"
    data.mkdir(exist_ok=True)
    rng = np.random.default_rng(1)
    for i in range(2):
        np.savez(data / f"s{i}.npz", hidden_states=rng.normal(0, 1, (1, 16, 32)).astype(np.float32))
    print(json.dumps({"nodes": len(model.graph.node)}))


def pick(model: str, k: str) -> None:
    """`k` node-output names spread evenly over the graph (float tensors of single-output nodes)."""
    import onnx

    graph = onnx.load(model, load_external_data=False).graph
    names = [n.output[0] for n in graph.node if len(n.output) == 1 and n.op_type not in (
        "Shape", "Gather", "Constant", "Unsqueeze", "Concat", "QuantizeLinear", "Cast")]
    count = int(k)
    step = max(1, len(names) // (count + 1))
    print(json.dumps(names[step::step][:count]))


def external(out: str) -> None:
    """A model whose 192 MiB of weights (four [3584, 3584] float32 MatMul weights) are external data."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    size, rng, nodes, inits, previous = 3584, np.random.default_rng(0), [], [], "x"
    for i in range(4):
        weight = rng.standard_normal((size, size), dtype=np.float32) * 0.01
        inits.append(numpy_helper.from_array(weight, f"w{i}"))
        nodes += [helper.make_node("MatMul", [previous, f"w{i}"], [f"m{i}"], name=f"matmul{i}"),
                  helper.make_node("Relu", [f"m{i}"], [f"r{i}"], name=f"relu{i}")]
        previous = f"r{i}"
    graph = helper.make_graph(nodes, "external", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, size])],
                              [helper.make_tensor_value_info(previous, TensorProto.FLOAT, [1, size])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, out, save_as_external_data=True, all_tensors_to_one_file=True,
              location=Path(out).stem + ".bin", size_threshold=1024)


if __name__ == "__main__":
    {"floor": floor, "checker": checker, "naive": naive, "exposed": exposed, "exposed_read": exposed_read, "plan": plan, "nan_data": nan_data, "big": big,
     "pick": pick, "external": external}[sys.argv[1]](*sys.argv[2:])
