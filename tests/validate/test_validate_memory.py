"""`mi validate` of a model with large external weights reads them without holding them (issue 15,
"not counted": 2 GB of external weights peaked at 6.3 GB RSS). A memory assertion, not a timing one:
the peak resident size of a fresh process, above what it held after validating a tiny model first.

The peak is /proc's VmHWM, not getrusage's ru_maxrss: Linux carries ru_maxrss across fork and exec,
so a child of a large pytest process would start at its parent's peak and measure nothing."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

SHAPE = (768, 16384)  # 48 MiB of float32 per weight, four weights: 192 MiB of external data
LARGEST_MIB = SHAPE[0] * SHAPE[1] * 4 / 2**20

PROBE = """
import json, sys
from inspector_cli.validate.config import ValidateConfig
from inspector_cli.workflows.validate import validate_model
config = ValidateConfig(disable=("MI401", "MI402", "MI403", "MI404"))  # no session: mi's own reading only
validate_model(sys.argv[1], config)  # imports and first-use allocations, before the baseline
def peak_kib():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
base = peak_kib()
result = validate_model(sys.argv[2], config)
peak = peak_kib()
print(json.dumps({"grew_mib": (peak - base) / 1024,
                  "mi407": [f.message for f in result.findings if f.rule == "MI407"]}))
"""


def _chain(path, weights, shape) -> None:
    # 2-D on purpose: onnx's shape-inference data propagation expands a large 1-D Add into one
    # protobuf dimension per element (3.5 GB for 12M elements), a cost of onnx, not of reading weights
    inits = [numpy_helper.from_array(w, f"w{i}") for i, w in enumerate(weights)]
    nodes, previous = [], "x"
    for i in range(len(weights)):
        nodes.append(helper.make_node("Add", [previous, f"w{i}"], [f"y{i}"], name=f"add{i}"))
        previous = f"y{i}"
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info(previous, TensorProto.FLOAT, list(shape))], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
              location=path.stem + ".bin", size_threshold=0)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads VmHWM from /proc")
def test_validate_reads_200_mb_of_external_weights_in_little_more_than_one_tensor(tmp_path):
    weights = [np.zeros(SHAPE, np.float32) for _ in range(4)]
    weights[3][-1, -1] = np.nan  # the last element of the last tensor: the streamed check reads to the end
    _chain(tmp_path / "big.onnx", weights, SHAPE)
    del weights
    _chain(tmp_path / "tiny.onnx", [np.zeros((2, 2), np.float32)], (2, 2))
    done = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / "tiny.onnx"), str(tmp_path / "big.onnx")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["mi407"] == ["initializer 'w3' holds 1 NaN and 0 Inf of 12582912 values (read by add3)"]
    # reading every weight whole (a proto copy, then a numpy copy) grew by 3.3x the largest tensor
    assert report["grew_mib"] <= 1.2 * LARGEST_MIB, report
