"""`mi inspect`: the scope tree of a model, node facts by pattern or name, and a structural diff."""
from __future__ import annotations

import dataclasses
import difflib
from typing import Optional

from ..core.graph import ModelGraph, load_model
from ..core.scope_tree import build_scope_tree
from ..errors import SelectionError, UsageError
from ..inspection.build import node_briefs, scope_map, tensor_fact
from ..inspection.config import InspectConfig
from ..inspection.diff import diff_trees
from ..inspection.facts import node_facts
from ..inspection.find import find_nodes
from ..results.base import ModelRef
from ..results.inspect import InspectResult, InspectTable


def _mode(config: InspectConfig) -> str:
    chosen = [m for m, v in (("find", config.find), ("node", config.node), ("diff", config.diff)) if v]
    if len(chosen) > 1:
        raise UsageError(f"--{chosen[0]} and --{chosen[1]} cannot be combined; pass one of --find, --node, --diff")
    return chosen[0] if chosen else "tree"


def inspect_model(model: "str | ModelGraph", config: Optional[InspectConfig] = None, *,
                  table_only: bool = False) -> InspectResult:
    """Inspect one model statically (nothing is run); see `InspectConfig` for the modes.

    `table_only`: the result is only printed as tables (no JSON, HTML or suite step reads it): an
    `InspectTable`, whose scope map stops at `config.depth` and which has no node list; every figure
    the tables show is the same (not for --diff, which aligns whole trees)."""
    config = config or InspectConfig()
    mode = _mode(config)
    graph = model if isinstance(model, ModelGraph) else load_model(model, early_types=True)
    table_only = table_only and mode != "diff"
    tree = build_scope_tree(graph, depth=config.depth if table_only else None)
    fields = dict(
        models=[ModelRef.of(graph, role="model")], config=dataclasses.asdict(config), mode=mode, depth=config.depth,
        scope_map=scope_map(graph, tree, node_scopes=not table_only),
        nodes=[] if table_only else node_briefs(graph, tree),
        model_inputs=[tensor_fact(graph, t) for t in graph.input_names],
        model_outputs=[tensor_fact(graph, t) for t in graph.output_names],
        opsets={imp.domain or "ai.onnx": imp.version for imp in graph.model.opset_import},
        dynamic_dims=tree.dynamic_dims,
        notes=["FLOPs and activation bytes count dynamic dimensions as 1"] if tree.dynamic_dims else [])
    result = (InspectTable(**fields, node_count=len(graph.nodes), scope_count=tree.scope_count)  # type: ignore[arg-type]
              if table_only else InspectResult(**fields))  # type: ignore[arg-type]
    if mode == "find":
        assert config.find is not None
        names = find_nodes(graph, tree, config.find)
        return dataclasses.replace(result, pattern=config.find,
                                   matches=[node_facts(graph, tree, n) for n in names])
    if mode == "node":
        assert config.node is not None
        if config.node not in graph.node_by_name:
            close = difflib.get_close_matches(config.node, list(graph.node_by_name), n=3)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise SelectionError(f"--node '{config.node}': no node of that name in {graph.display_name}{hint}")
        return dataclasses.replace(result, pattern=config.node, matches=[node_facts(graph, tree, config.node)])
    if mode == "diff":
        assert config.diff is not None
        other = load_model(config.diff, early_types=True)
        other_tree = build_scope_tree(other)
        return dataclasses.replace(
            result, models=result.models + [ModelRef.of(other, role="other")],
            other_map=scope_map(other, other_tree), other_nodes=node_briefs(other, other_tree),
            changes=diff_trees(graph, tree, other, other_tree, config.depth))
    return result
