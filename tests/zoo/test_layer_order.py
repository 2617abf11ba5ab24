"""Layer rows and the first divergence in the reference's graph order on every `--layers` run of the sweep
(issue 41): the rows of `compare fp32 V --layers all` follow a topological order of fp32's graph computed
here (Kahn's algorithm over the onnx file, ties by file position; a node's outputs in their order), and the
first divergence is the earliest row in that order whose layer thresholds failed. Before, the second and
later outputs of multi-output nodes sorted before the first layer (onnxruntime-genai's `present.*`,
SkipSimplifiedLayerNormalization's `output_3`) and one of them was named the first divergence."""
from __future__ import annotations

import heapq
from pathlib import Path
from typing import Dict, Tuple

import pytest

from .sweep import QUANTISED, layers_doc
from .test_sweep import CASES, _case, _fact

pytestmark = pytest.mark.zoo


def graph_order(path: Path) -> Dict[str, Tuple[int, int]]:
    """tensor -> (its producer's position in a topological order of the top-level graph, output index);
    only onnx, no mi code."""
    import onnx

    nodes = list(onnx.load(str(path), load_external_data=False).graph.node)
    producer = {out: i for i, node in enumerate(nodes) for out in node.output if out}
    waiting = [len({producer[t] for t in node.input if t in producer}) for node in nodes]
    readers: Dict[int, list] = {}
    for i, node in enumerate(nodes):
        for j in {producer[t] for t in node.input if t in producer}:
            readers.setdefault(j, []).append(i)
    ready = [i for i, count in enumerate(waiting) if count == 0]
    heapq.heapify(ready)
    position: Dict[str, Tuple[int, int]] = {}
    rank = 0
    while ready:
        i = heapq.heappop(ready)
        for k, out in enumerate(nodes[i].output):
            if out:
                position[out] = (rank, k)
        rank += 1
        for j in readers.get(i, ()):
            waiting[j] -= 1
            if waiting[j] == 0:
                heapq.heappush(ready, j)
    return position


@pytest.mark.parametrize("model,variant", CASES)
def test_first_divergence_is_first_in_graph_order(request, sweep, model, variant):
    _case(request, sweep, "order", model, variant)
    runs = [sweep.compare(model, variant)] + ([sweep.compare(model, variant, "disable")] if variant in QUANTISED else [])
    position = graph_order(sweep.path(model, "fp32"))
    off = []
    for run in runs:
        if run.rc in (3, 4) or not run.json_path:
            pytest.fail(f"{run.command} exited {run.rc}: {run.stderr_tail.strip()[-300:]}")
        doc = layers_doc(run)
        rows = [layer["name"] for layer in doc.get("layers", [])]
        keys = [position.get(name, (-1, 0)) for name in rows]
        out_of_order = [(rows[i], rows[i + 1]) for i in range(len(rows) - 1) if keys[i] > keys[i + 1]]
        failed = [layer["name"] for layer in doc.get("layers", []) if layer.get("failed_gates")]
        first = min(failed, key=lambda name: position.get(name, (-1, 0))) if failed else None
        if out_of_order:
            off.append(f"{run.command}: {len(out_of_order)} rows out of graph order, first {out_of_order[0]}")
        if doc.get("first_divergence") != first:
            off.append(f"{run.command}: first divergence {doc.get('first_divergence')!r}, in graph order {first!r}")
        _fact(sweep, model, variant, **{f"order_{run.command}": first})
    assert not off, "\n".join(off)
