"""MI6xx: optimisation hints (info), from the graph patterns shared with `mi profile`."""
from __future__ import annotations

from typing import List, Set

from ..core.patterns import DETECTORS, PatternMatch
from .catalog import RULES
from .context import Context

GROUP_ABOVE = 5
"""More matches of one hint than this become a single finding listing them."""
PATTERN_RULES = {
    "conv-bn": "MI601",
    "transpose-pair": "MI602",
    "reshape-chain": "MI603",
    "cast-roundtrip": "MI604",
    "identity": "MI605",
}


def check_hints(ctx: Context) -> None:
    """One finding per pattern match, on the first node of the match; only enabled detectors run."""
    reported: Set[str] = set()
    for pattern, rule_id in PATTERN_RULES.items():
        if not ctx.reporter.enabled(rule_id):
            continue
        matches = DETECTORS[pattern](ctx.graph)
        if len(matches) > GROUP_ABOVE:
            # Exporters repeat one pattern dozens of times (torch's Identity copies of shared weights):
            # one finding with the list keeps the report readable.
            first = [m.nodes[0] for m in matches]
            shown = ", ".join(first[1:6]) + (", ..." if len(first) > 6 else "")
            ctx.report(rule_id, f"{len(matches)}x {RULES[rule_id].title}: {matches[0].message} (and {shown})",
                       node=first[0], nodes=first)
        for match in matches if len(matches) <= GROUP_ABOVE else ():
            ctx.report(rule_id, match.message, node=match.nodes[0], nodes=list(match.nodes))
        for match in matches:
            reported.update(match.nodes)
    if ctx.reporter.enabled("MI606"):
        _constant_subgraphs(ctx, DETECTORS["constant-subgraph"](ctx.graph), reported)


def _constant_subgraphs(ctx: Context, matches: List[PatternMatch], reported: Set[str]) -> None:
    """One finding per constant subgraph, on its last node (the one whose result leaves it)."""
    constant = {m.nodes[0] for m in matches}
    graph = ctx.graph
    for match in matches:
        name = match.nodes[0]
        node = graph.node_by_name[name]
        consumers = [c for o in node.outputs if o for c in graph.consumers.get(o, [])]
        if consumers and all(c.name in constant for c in consumers):
            continue  # inside the subgraph: reported with its last node
        members = _upstream(ctx, name, constant)
        if not members and name in reported:
            continue  # a lone Identity of a constant: MI605 already says it
        what = f"ends a constant subgraph of {len(members) + 1} nodes" if members else "computes a constant"
        ctx.report("MI606", f"{node.op_type} '{name}' {what}; fold it (onnxruntime does at load, other runtimes "
                            "may not)", node=name, nodes=[*members, name])


def _upstream(ctx: Context, start: str, constant: Set[str]) -> List[str]:
    return sorted(ctx.ancestors_within(start, constant), key=lambda n: ctx.graph.node_by_name[n].order)
