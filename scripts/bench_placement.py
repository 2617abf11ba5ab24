"""The cost of the placement read (docs/providers.md): a session built and run as mi builds it,
with onnxruntime's graph-assignment record on and read back, against the same session without.

Builds a 25-block CNN (Conv, Relu, Sigmoid, Mul per block: 100 nodes) and an equally long MLP
(MatMul, Add, Tanh), runs each session for RUNS samples (an ordinary short compare), alternating
the two kinds of session so drift hits both, and prints the ratio of the medians. With an
onnxruntime that has OpenVINOExecutionProvider, pass `--providers OpenVINOExecutionProvider,CPUExecutionProvider`.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import onnxruntime as ort
from onnx import helper, numpy_helper

RECORD = "session.record_ep_graph_assignment_info"


def cnn(blocks: int = 25) -> bytes:
    rng = np.random.RandomState(0)
    nodes, inits, x = [], [], "x"
    for i in range(blocks):
        inits.append(numpy_helper.from_array((rng.randn(16, 16, 3, 3) * 0.1).astype(np.float32), f"w{i}"))
        nodes += [helper.make_node("Conv", [x, f"w{i}"], [f"c{i}"], name=f"conv{i}", pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}"),
                  helper.make_node("Sigmoid", [f"r{i}"], [f"s{i}"], name=f"sig{i}"),
                  helper.make_node("Mul", [f"r{i}", f"s{i}"], [f"m{i}"], name=f"mul{i}")]
        x = f"m{i}"
    graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", 1, [1, 16, 32, 32])],
                              [helper.make_tensor_value_info(x, 1, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def one(model: bytes, providers: list, record: bool, runs: int) -> float:
    start = time.perf_counter()
    options = ort.SessionOptions()
    options.log_severity_level = 3
    if record:
        options.add_session_config_entry(RECORD, "1")
    session = ort.InferenceSession(model, options, providers=providers)
    if record:
        assert session.get_provider_graph_assignment_info()
    feeds = {"x": np.random.RandomState(1).rand(1, 16, 32, 32).astype(np.float32)}
    for _ in range(runs):
        session.run(None, feeds)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--providers", default="CPUExecutionProvider")
    parser.add_argument("--runs", type=int, default=10, help="samples per session (default 10)")
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    model, providers = cnn(), args.providers.split(",")
    one(model, providers, True, 1)  # warm the process
    plain, placed = [], []
    for repeat in range(args.repeats):  # the order swaps every repeat: neither kind always goes first
        for record in ((False, True) if repeat % 2 == 0 else (True, False)):
            (placed if record else plain).append(one(model, providers, record, args.runs))
    a, b = statistics.median(plain), statistics.median(placed)
    print(f"onnxruntime {ort.__version__}, {providers[0]}, 100 nodes, {args.runs} runs per session, "
          f"{args.repeats} repeats")
    print(f"plain session        median {a * 1000:8.2f} ms")
    print(f"placement recorded   median {b * 1000:8.2f} ms")
    print(f"ratio placement/plain: {b / a:.3f} (cost {100 * (b / a - 1):+.1f}%)")


if __name__ == "__main__":
    main()
