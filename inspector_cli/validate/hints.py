"""MI6xx: optimisation hints (info), from the graph patterns shared with `mi profile`."""
from __future__ import annotations

from ..core.patterns import DETECTORS
from .context import Context

PATTERN_RULES = {
    "conv-bn": "MI601",
    "transpose-pair": "MI602",
    "reshape-chain": "MI603",
    "cast-roundtrip": "MI604",
    "identity": "MI605",
    "constant-subgraph": "MI606",
}


def check_hints(ctx: Context) -> None:
    """One finding per pattern match, on the first node of the match; only enabled detectors run."""
    for pattern, rule_id in PATTERN_RULES.items():
        if not ctx.reporter.enabled(rule_id):
            continue
        for match in DETECTORS[pattern](ctx.graph):
            ctx.report(rule_id, match.message, node=match.nodes[0], nodes=list(match.nodes))
