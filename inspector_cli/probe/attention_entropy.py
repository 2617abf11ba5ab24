"""The plugin shipped as a worked example: attention entropy of Softmax outputs.

For each row of a Softmax output (along the node's `axis`, default -1) the entropy
H = -sum p log p is normalised by log(L), L the row length: 0 means all mass on one position
(collapsed attention), 1 a uniform row (attending to nothing in particular). Reported per tensor
over all rows of all samples: mean, min and max normalised entropy, and the shares of collapsed
(< 0.1) and near-uniform (> 0.95) rows. Constant memory: running sums only.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Optional

import numpy as np

from ..plugins import NodeView, Plugin

COLLAPSED = 0.1
UNIFORM = 0.95


class AttentionEntropy(Plugin):
    name = "attention-entropy"
    description = "normalised entropy of Softmax rows (0 = collapsed on one position, 1 = uniform)"

    def __init__(self) -> None:
        self._rows: Dict[str, Dict[str, float]] = {}

    def accepts(self, name: str, node: Optional[NodeView]) -> bool:
        return node is not None and node.op_type == "Softmax"

    def process_tensor(self, name: str, array: np.ndarray, node: Optional[NodeView]) -> None:
        axis = int(node.attributes.get("axis", -1)) if node is not None else -1
        p = np.moveaxis(np.asarray(array, dtype=np.float64), axis, -1)
        length = p.shape[-1] if p.ndim else 1
        if length < 2:
            return
        rows = p.reshape(-1, length)
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(rows > 0, rows * np.log(rows), 0.0)
        entropy = -terms.sum(axis=1) / math.log(length)
        entropy = entropy[np.isfinite(entropy)]
        acc = self._rows.setdefault(name, {"rows": 0, "sum": 0.0, "min": math.inf, "max": -math.inf,
                                           "collapsed": 0, "uniform": 0, "length": length})
        if entropy.size == 0:
            return
        acc["rows"] += entropy.size
        acc["sum"] += float(entropy.sum())
        acc["min"] = min(acc["min"], float(entropy.min()))
        acc["max"] = max(acc["max"], float(entropy.max()))
        acc["collapsed"] += int(np.count_nonzero(entropy < COLLAPSED))
        acc["uniform"] += int(np.count_nonzero(entropy > UNIFORM))

    def merge(self, other: "AttentionEntropy") -> None:
        for name, theirs in other._rows.items():
            mine = self._rows.get(name)
            if mine is None:
                self._rows[name] = dict(theirs)
                continue
            for key in ("rows", "sum", "collapsed", "uniform"):
                mine[key] += theirs[key]
            mine["min"], mine["max"] = min(mine["min"], theirs["min"]), max(mine["max"], theirs["max"])

    def summary(self) -> Dict[str, Dict[str, Any]]:
        out: Dict[str, Dict[str, Any]] = {}
        for name, acc in self._rows.items():
            rows = int(acc["rows"])
            out[name] = {"rows": rows, "length": int(acc["length"]),
                         "mean_entropy": acc["sum"] / rows if rows else None,
                         "min_entropy": acc["min"] if rows else None, "max_entropy": acc["max"] if rows else None,
                         "collapsed_share": acc["collapsed"] / rows if rows else None,
                         "uniform_share": acc["uniform"] / rows if rows else None}
        return out
