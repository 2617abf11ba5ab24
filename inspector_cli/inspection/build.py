"""The core scope tree as result data: a `ScopeMap` and the nodes in topological order."""
from __future__ import annotations

from typing import Dict, List

from ..core.graph import ModelGraph
from ..core.scope_blocks import block_patterns
from ..core.scope_tree import ScopeTree
from ..core.scopes import scope_name
from ..core.types import format_shape
from ..results.inspect import NodeBrief, TensorFact
from ..results.scopes import ScopeInfo, ScopeMap


def scope_map(graph: ModelGraph, tree: ScopeTree) -> ScopeMap:
    """Every scope (parents before children, siblings in topological order) and each node's scope."""
    info = graph.all_tensor_info()
    patterns = block_patterns(graph, tree.node_path) if tree.source == "structure" else {}
    scopes: List[ScopeInfo] = []
    for scope in tree.scopes():
        children = sorted(scope.children.values(), key=lambda s: s.first)
        outputs = list(scope.outputs)
        scopes.append(ScopeInfo(
            path=scope.name, name=scope.path[-1] if scope.path else "", depth=len(scope.path), kind=scope.kind,
            nodes=scope.count, ops=dict(sorted(scope.ops.items(), key=lambda kv: (-kv[1], kv[0]))),
            params=scope.params, param_bytes=scope.param_bytes,
            flops=scope.flops if not scope.flops_unknown else (scope.flops or None),
            activation_bytes=scope.activation_bytes, inputs=list(scope.inputs), outputs=outputs,
            output_shapes=[format_shape(info[t].shape) if t in info else "?" for t in outputs[:8]],
            children=[c.name for c in children], pattern=patterns.get(scope.path, "")))
    node_scope: Dict[str, str] = {name: scope_name(path) for name, path in tree.node_path.items()}
    return ScopeMap(source=tree.source, node_scope=node_scope, scopes=scopes)


def node_briefs(graph: ModelGraph, tree: ScopeTree) -> List[NodeBrief]:
    """Every top-level node in topological order with its scope, edges, FLOPs and output bytes."""
    return [NodeBrief(name=n.name, op_type=n.op_type, scope=scope_name(tree.node_path[n.name]),
                      inputs=[t for t in n.inputs if t], outputs=[t for t in n.outputs if t],
                      flops=tree.node_flops.get(n.name), activation_bytes=tree.node_bytes.get(n.name, 0))
            for n in graph.nodes]


def tensor_fact(graph: ModelGraph, name: str) -> TensorFact:
    """dtype, shape and role of one tensor."""
    ti = graph.tensor_info(name)
    if name in graph.initializer_names:
        kind = "weight"
    elif name in graph.input_names:
        kind = "input"
    elif name in graph.output_names:
        kind = "output"
    elif name in graph.producer and graph.producer[name].op_type == "Constant":
        kind = "constant"
    else:
        kind = "activation"
    return TensorFact(name=name, dtype=ti.dtype_name if ti.elem_type else "", shape=format_shape(ti.shape),
                      kind=kind)
