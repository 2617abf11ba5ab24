"""The static cost model now lives in core/cost.py (shared with `mi inspect`'s scope tree); re-exported here."""
from __future__ import annotations

from ..core.cost import ELEMENTWISE, PER_ELEMENT, READS_INPUT, NodeCost, ShapeOf, model_costs, node_cost

__all__ = ["ELEMENTWISE", "PER_ELEMENT", "READS_INPUT", "NodeCost", "ShapeOf", "model_costs", "node_cost"]
