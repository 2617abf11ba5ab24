"""Which execution provider onnxruntime assigned each node to, as onnxruntime itself records it.

Every session mi opens sets `session.record_ep_graph_assignment_info`; onnxruntime then keeps,
from its partitioning, the subgraphs it gave each provider and their nodes (original node names:
a compiling provider such as OpenVINO lists the nodes it fused into one kernel). Reading it costs
nothing at run time (no profiler, no extra run). Builds without the API give None, and the caller
falls back on the providers of profiled kernel events.
"""
from __future__ import annotations

from typing import Any, List, Optional, Tuple

RECORD_ASSIGNMENT = "session.record_ep_graph_assignment_info"
"""onnxruntime's session config key that keeps the provider assignment for reading back."""

Subgraph = Tuple[str, List[Tuple[str, str]]]
"""(provider, [(node name, op type)]) of one partition."""


def read_assignment(ort_session: Any) -> Optional[List[Subgraph]]:
    """The partitions of an `onnxruntime.InferenceSession`, in onnxruntime's order; None when this
    onnxruntime cannot say (no such API, or the session was built without the record key)."""
    reader = getattr(ort_session, "get_provider_graph_assignment_info", None)
    if reader is None:
        return None
    try:
        parts = reader()
    except Exception:  # noqa: BLE001 - onnxruntime raises its own types when recording was off
        return None
    out: List[Subgraph] = []
    for part in parts:
        nodes = [(str(n.name), str(n.op_type)) for n in part.get_nodes()]
        out.append((str(part.ep_name), nodes))
    return out or None
