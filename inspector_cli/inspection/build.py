"""The core scope tree as result data: a `ScopeMap` and the nodes in topological order."""
from __future__ import annotations

from typing import Dict, List, Tuple

from ..core.graph import ModelGraph
from ..core.scope_blocks import block_patterns
from ..core.scope_tree import ScopeTree
from ..core.scopes import Path, scope_name
from ..core.types import format_shape
from ..results.inspect import NodeBrief, TensorFact
from ..results.scopes import ScopeInfo, ScopeMap


def scope_map(graph: ModelGraph, tree: ScopeTree, node_scopes: bool = True) -> ScopeMap:
    """Every scope (parents before children, siblings in topological order) and each node's scope
    (`node_scopes=False`: none, for a table that shows only the scopes)."""
    info = graph.all_tensor_info()
    get_info = info.get
    patterns = block_patterns(graph, tree.node_path) if tree.source == "structure" else {}
    scopes: List[ScopeInfo] = []
    new = object.__new__
    texts: Dict[object, str] = {}  # shape -> its text: a handful of shapes among 24,000 scopes' outputs
    names: Dict[Path, str] = {}

    def shape_text(tensor: str) -> str:
        ti = get_info(tensor)
        if ti is None:
            return "?"
        text = texts.get(ti.shape)
        if text is None:
            text = texts[ti.shape] = format_shape(ti.shape)
        return text

    # the tree walked depth first here (as `ScopeTree.scopes`), so each scope's children are sorted once
    stack = [tree.root]
    while stack:
        scope = stack.pop()
        path = scope.path
        name = names[path] = "/".join(path)
        children = scope.ordered_children() if scope.children else []
        if children:
            stack.extend(reversed(children))
        outputs = list(scope.outputs)
        ops = scope.ops
        info_ = new(ScopeInfo)  # frozen dataclass filled directly (24,000 scopes at 50,000 nodes)
        info_.__dict__.update(
            path=name, name=path[-1] if path else "", depth=len(path), kind=scope.kind,
            nodes=scope.count, ops=dict(sorted(ops.items(), key=_op_order)) if len(ops) > 1 else dict(ops),
            params=scope.params, param_bytes=scope.param_bytes,
            flops=scope.flops if not scope.flops_unknown else (scope.flops or None),
            activation_bytes=scope.activation_bytes, inputs=list(scope.inputs), outputs=outputs,
            output_shapes=[shape_text(t) for t in outputs[:8]],
            children=["/".join(c.path) for c in children], pattern=patterns.get(path, ""))
        scopes.append(info_)
    get_name = names.get
    node_scope: Dict[str, str] = {name: get_name(path) or scope_name(path) for name, path in tree.node_path.items()
                                  } if node_scopes else {}
    return ScopeMap(source=tree.source, node_scope=node_scope, scopes=scopes)


def _op_order(item: Tuple[str, int]) -> Tuple[int, str]:
    return -item[1], item[0]


def node_briefs(graph: ModelGraph, tree: ScopeTree) -> List[NodeBrief]:
    """Every top-level node in topological order with its scope, edges, FLOPs and output bytes."""
    names: Dict[tuple, str] = {}  # scope path -> its name, joined once per scope rather than per node
    briefs: List[NodeBrief] = []
    new = object.__new__
    node_path, node_flops, node_bytes = tree.node_path, tree.node_flops, tree.node_bytes
    for n in graph.nodes:
        path = node_path[n.name]
        scope = names.get(path)
        if scope is None:
            scope = names[path] = scope_name(path)
        # frozen dataclass: filled directly, its __init__ sets each field through object.__setattr__
        brief = new(NodeBrief)
        brief.__dict__.update(name=n.name, op_type=n.op_type, scope=scope,
                              inputs=[t for t in n.inputs if t] if "" in n.inputs else list(n.inputs),
                              outputs=[t for t in n.outputs if t] if "" in n.outputs else list(n.outputs),
                              flops=node_flops.get(n.name), activation_bytes=node_bytes.get(n.name, 0))
        briefs.append(brief)
    return briefs


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
