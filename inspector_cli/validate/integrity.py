"""MI3xx: graph integrity of the top-level graph (edges, names, reachability, order).

Works on the graph core's view (`ModelGraph`), which renames unnamed and duplicate nodes; the
original names (`NodeInfo.original_name`) are what the naming rules look at.
"""
from __future__ import annotations

from collections import Counter
from typing import Dict, List, Set

from .context import Context


def check_integrity(ctx: Context) -> None:
    """Run every MI3xx rule."""
    graph = ctx.graph
    known = set(graph.initializer_names) | {i.name for i in graph.model.graph.input}
    producers: Dict[str, List[str]] = {}
    for node in graph.nodes:
        for out in node.outputs:
            if out:
                producers.setdefault(out, []).append(node.name)
    _dangling(ctx, known, producers)
    _duplicates(ctx, known, producers)
    for name in graph.output_names:
        if name not in producers and name not in known:
            ctx.report("MI303", f"graph output '{name}' is produced by no node and is not an input or initializer",
                       tensor=name)
    _unused(ctx)
    _dead_nodes(ctx)
    _names(ctx)
    _order(ctx, known, producers)
    for vi in graph.model.graph.input:
        if vi.name in graph.initializer_names:
            ctx.report("MI311", f"initializer '{vi.name}' is also a graph input: callers may override it, so it "
                                "cannot be constant-folded", tensor=vi.name)


def _dangling(ctx: Context, known: Set[str], producers: Dict[str, List[str]]) -> None:
    for node in ctx.graph.nodes:
        for tensor in node.all_inputs:
            if tensor and tensor not in producers and tensor not in known:
                ctx.report("MI301", f"{node.op_type} '{node.name}' reads '{tensor}', which no node produces and "
                                    "which is not a graph input or initializer", node=node.name, tensor=tensor)


def _duplicates(ctx: Context, known: Set[str], producers: Dict[str, List[str]]) -> None:
    graph = ctx.graph.model.graph
    for kind, names in (("graph input", [i.name for i in graph.input]),
                        ("initializer", [t.name for t in graph.initializer])):
        for name, count in Counter(names).items():
            if count > 1:
                ctx.report("MI302", f"{kind} name '{name}' is declared {count} times", tensor=name)
    for tensor, nodes in producers.items():
        if len(nodes) > 1:
            ctx.report("MI302", f"tensor '{tensor}' is produced by {len(nodes)} nodes: {', '.join(nodes)}",
                       node=nodes[1], tensor=tensor, nodes=nodes)
        elif tensor in known:
            what = "an initializer" if tensor in ctx.graph.initializer_names else "a graph input"
            ctx.report("MI302", f"{ctx.node_label(nodes[0])} writes '{tensor}', which is also {what}",
                       node=nodes[0], tensor=tensor)


def _unused(ctx: Context) -> None:
    graph = ctx.graph
    outputs = set(graph.output_names)
    for name in graph.initializer_names:
        if name not in graph.consumers and name not in outputs:
            ctx.report("MI304", f"initializer '{name}' is read by no node", tensor=name)
    for name in graph.input_names:
        if name not in graph.consumers and name not in outputs:
            ctx.report("MI305", f"graph input '{name}' is read by no node", tensor=name)


def _dead_nodes(ctx: Context) -> None:
    """Nodes from which no graph output is reachable, reported once per dead sink with its dead ancestors."""
    graph = ctx.graph
    live: Set[str] = set()
    stack = [graph.producer[o].name for o in graph.output_names if o in graph.producer]
    while stack:
        name = stack.pop()
        if name in live:
            continue
        live.add(name)
        for tensor in graph.node_by_name[name].all_inputs:
            producer = graph.producer.get(tensor)
            if producer is not None and producer.name not in live:
                stack.append(producer.name)
    dead = [n for n in graph.nodes if n.name not in live]
    dead_names = {n.name for n in dead}
    for node in dead:
        consumers = {c.name for o in node.outputs for c in graph.consumers.get(o, [])}
        if consumers & dead_names:
            continue  # reported through the dead node it feeds
        upstream = ctx.ancestors_within(node.name, dead_names)
        extra = f" (with {len(upstream)} upstream node(s) that only feed it)" if upstream else ""
        ctx.report("MI306", f"{node.op_type} '{node.name}' reaches no graph output{extra}", node=node.name,
                   tensor=node.outputs[0] if node.outputs else None, upstream=upstream or None)


def _names(ctx: Context) -> None:
    graph = ctx.graph
    unnamed = [n.name for n in graph.nodes if not n.original_name]
    if unnamed:
        shown = ", ".join(unnamed[:5]) + (", ..." if len(unnamed) > 5 else "")
        ctx.report("MI307", f"{len(unnamed)} node(s) have no name; mi calls them {shown}", node=unnamed[0],
                   nodes=unnamed)
    for name, renamed in graph.duplicate_node_names().items():  # If/Loop bodies too: onnxruntime checks each
        where = "" if name in graph.node_by_name else " in a subgraph"
        ctx.report("MI308", f"{len(renamed) + 1} nodes are named '{name}'{where}: onnxruntime refuses the model (two "
                            f"nodes with same node name); mi names the later ones {', '.join(renamed[:5])}",
                   node=name if not where else None, renamed=renamed,
                   hint="give every node its own name; commands that run the model need --rename-duplicate-nodes "
                        "until then")


def _order(ctx: Context, known: Set[str], producers: Dict[str, List[str]]) -> None:
    graph = ctx.graph
    if graph.cycle_nodes:
        cycle = _find_cycle(ctx, set(graph.cycle_nodes))
        ctx.report("MI309", f"cycle: {' -> '.join(cycle + cycle[:1])}"
                            f"{f' ({len(graph.cycle_nodes)} nodes cannot be ordered)' if len(graph.cycle_nodes) > len(cycle) else ''}",
                   node=cycle[0], cycle=cycle)
        return
    defined = set(known)
    for proto in graph.model.graph.node:  # file order
        late = [t for t in proto.input if t and t not in defined and t in producers]
        if late:
            ctx.report("MI310", f"{proto.op_type} '{proto.name}' comes before the producer of its input "
                                f"'{late[0]}' ({producers[late[0]][0]})", node=proto.name, tensor=late[0])
            return
        defined.update(o for o in proto.output if o)


def _find_cycle(ctx: Context, stuck: Set[str]) -> List[str]:
    """One actual cycle among the nodes Kahn's algorithm could not place (depth-first search)."""
    graph = ctx.graph

    def successors(name: str) -> List[str]:
        node = graph.node_by_name[name]
        return [c.name for o in node.outputs if o for c in graph.consumers.get(o, []) if c.name in stuck]

    for start in sorted(stuck, key=lambda n: graph.node_by_name[n].order):
        path: List[str] = []
        on_path: Dict[str, int] = {}
        visited: Set[str] = set()
        stack = [(start, iter(successors(start)))]
        path.append(start)
        on_path[start] = 0
        while stack:
            name, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                visited.add(path.pop())
                on_path.pop(name, None)
                continue
            if nxt in on_path:
                return path[on_path[nxt]:]
            if nxt not in visited:
                on_path[nxt] = len(path)
                path.append(nxt)
                stack.append((nxt, iter(successors(nxt))))
    return sorted(stuck)
