"""Model Explorer node data: per-tensor values to overlay on the graph in Google's Model Explorer.

Format (model_explorer.node_data_builder): `{graphId: {"results": {key: {"value": v}},
"thresholds": [{"value": t, "bgColor": c}, ...]}}`, keys being output tensor names (or node ids).
One file holds one metric; a result with several metrics writes PATH for the first and
`<stem>.<metric>.json` beside it for each other one. Non-finite values cannot be expressed there
and are left out (an identical tensor's SQNR of +inf included as a capped 200 dB).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Dict, List, Tuple

from ..results.base import NodeValues, Result

SQNR_CAP = 200.0
GOOD, MID, BAD = "#bbf7d0", "#fde68a", "#fca5a5"


def _thresholds(values: NodeValues) -> List[Dict[str, Any]]:
    """Colour buckets: each item colours values <= its value (Model Explorer's rule)."""
    if len(values.thresholds) >= 2:
        low, high = sorted(values.thresholds)[:2]
    else:
        finite = sorted(v for v in values.values.values() if math.isfinite(v))
        if not finite:
            return []
        low, high = finite[len(finite) // 4], finite[(3 * len(finite)) // 4]
    colours = (BAD, MID, GOOD) if values.higher_is_better else (GOOD, MID, BAD)
    return [{"value": low, "bgColor": colours[0]}, {"value": high, "bgColor": colours[1]},
            {"value": 1e308, "bgColor": colours[2]}]


def graph_node_data(values: NodeValues) -> Dict[str, Any]:
    results: Dict[str, Dict[str, float]] = {}
    for key, value in values.values.items():
        if value is None:
            continue
        if math.isinf(value) and values.metric == "sqnr":
            value = SQNR_CAP if value > 0 else -SQNR_CAP
        if not math.isfinite(value):
            continue
        results[key] = {"value": float(value)}
    return {"results": results, "thresholds": _thresholds(values)}


def node_data_files(result: Result, path: "str | Path") -> List[Tuple[Path, Dict[str, Any]]]:
    """(file path, document) for each metric of the result."""
    target = Path(path)
    refs = result.model_refs()
    graph_id = (refs[0].graph_name if refs and refs[0].graph_name else "main_graph")
    files = []
    for index, values in enumerate(result.node_values()):
        file = target if index == 0 else target.with_name(f"{target.stem}.{values.metric}{target.suffix or '.json'}")
        files.append((file, {graph_id: graph_node_data(values)}))
    return files
