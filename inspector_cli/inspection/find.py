"""`mi inspect --find PATTERN`: nodes by scoped name (glob), regex, op type or output shape.

Pattern forms: `op:Conv[,Gemm]` (op types, any case); `shape:*x512` (glob on an output's shape
written `1x16x512`, symbolic dims by name); `re:REGEX` (re.search on the scoped name
`scope/node` and on the node name); anything else is a glob on the scoped name and the node
name, or an exact node name.
"""
from __future__ import annotations

import fnmatch
import re
from typing import List

from ..core.graph import ModelGraph
from ..core.scope_tree import ScopeTree
from ..core.scopes import scope_name
from ..errors import UsageError


def scoped_name(tree: ScopeTree, node: str) -> str:
    """`scope/own-name`: the node's scope path and the last segment of its name."""
    scope = scope_name(tree.node_path.get(node, ()))
    own = node.rsplit("/", 1)[-1]
    return f"{scope}/{own}" if scope else own


def _shape_texts(graph: ModelGraph, outputs: tuple) -> List[str]:
    texts = []
    for tensor in outputs:
        shape = graph.tensor_info(tensor).shape
        if shape is not None:
            texts.append("x".join("?" if d is None else str(d) for d in shape))
    return texts


def find_nodes(graph: ModelGraph, tree: ScopeTree, pattern: str) -> List[str]:
    """Names of the nodes matching `pattern`, in topological order."""
    pattern = pattern.strip()
    if pattern.startswith("op:"):
        wanted = {p.strip().lower() for p in pattern[3:].split(",") if p.strip()}
        return [n.name for n in graph.nodes if n.op_type.lower() in wanted]
    if pattern.startswith("shape:"):
        glob = pattern[6:].replace(" ", "")
        return [n.name for n in graph.nodes
                if any(fnmatch.fnmatchcase(text, glob) for text in _shape_texts(graph, n.outputs))]
    if pattern.startswith("re:"):
        try:
            regex = re.compile(pattern[3:])
        except re.error as exc:
            raise UsageError(f"--find '{pattern}': invalid regular expression: {exc}") from None
        return [n.name for n in graph.nodes if regex.search(scoped_name(tree, n.name)) or regex.search(n.name)]
    if pattern in graph.node_by_name:
        return [pattern]
    return [n.name for n in graph.nodes
            if fnmatch.fnmatchcase(scoped_name(tree, n.name), pattern) or fnmatch.fnmatchcase(n.name, pattern)]
