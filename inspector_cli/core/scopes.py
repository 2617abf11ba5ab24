"""Where each node lives: its scope path, from names, torch metadata, local functions or structure.

Scope sources, in order of trust:
- torch's dynamo exporter writes `pkg.torch.onnx.name_scopes` (the module path, e.g.
  `['', 'layer1', 'layer1.0', 'layer1.0.conv', 'conv2d']`) into each node's metadata; its node
  names (`node_Conv_17`) carry no hierarchy, so the metadata wins where present;
- node names with a hierarchy: `/encoder/layer.3/attention/MatMul` (torchscript, tf2onnx, optimum),
  `a/b/c` and `a.b.c` (the last segment is the node's own name);
- nodes calling an ONNX local function become a scope of their own (kind `function`);
- models without usable names (`Conv_35`, `p2o.Conv.12`) fall back to structural blocks
  (core/scope_blocks.py).
"""
from __future__ import annotations

import ast
import re
from typing import Dict, List, Optional, Sequence, Tuple

from .graph import ModelGraph, NodeInfo
from .scope_blocks import TRANSPARENT, structural_scopes

Path = Tuple[str, ...]
TORCH_SCOPES = "pkg.torch.onnx.name_scopes"
_NUMERIC = re.compile(r"^\d+$")


def torch_scope(entries: Sequence[str]) -> Path:
    """Scope path from dynamo's `name_scopes` list: module qualified names, made relative to their parent.

    `['', 'layer1', 'layer1.0', 'layer1.0.bn', 'batch_norm']` -> ('layer1', '0', 'bn'): the root ''
    and the last entry (the op's own name) are dropped, so '.'.join(path) is the module's name.
    """
    path: List[str] = []
    previous = ""
    for entry in list(entries)[1:-1]:
        if not entry:
            continue
        segment = entry[len(previous) + 1:] if previous and entry.startswith(previous + ".") else entry
        path.extend(s for s in segment.split(".") if s)
        previous = entry
    return tuple(path)


def name_scope(node: NodeInfo) -> Path:
    """Scope path from a node name: `/a/b/Op_3` and `a/b/c` split on '/' (then '.'), `a.b.c` on '.'.

    The last segment is the node's own name; with dots, a trailing number and the op type are
    the own name too (`p2o.Conv.12` -> ('p2o',)), so converter counters never make scopes.
    """
    name = node.original_name or node.name
    if "/" in name:
        return _slash_scope([s for s in name.split("/") if s][:-1])
    if "." in name:
        segments = [s for s in name.split(".") if s]
        while segments and _NUMERIC.match(segments[-1]):
            segments.pop()
        if segments and segments[-1].lower() == node.op_type.lower():
            segments.pop()
        elif segments:
            segments.pop()
        return tuple(segments)
    return ()


def _slash_scope(segments: List[str]) -> Path:
    """Scope path of the '/'-separated segments of a name before its own name (none of them empty)."""
    if len(segments) == 1:  # `a.b.c/Op`, the common case: no parent to strip (a pass at 50,000 nodes)
        parts = segments[0].split(".")
        return tuple(parts) if "" not in parts else tuple(p for p in parts if p)
    # torchscript repeats the parent in Sequential children (`/layer1/layer1.0/conv`): keep '0'
    relative = [seg[len(prev) + 1:] if prev and seg.startswith(prev + ".") else seg
                for prev, seg in zip([""] + segments, segments)]
    # module paths inside a segment (`layers.0.self_attn`) are levels of the hierarchy too
    return tuple(part for seg in relative for part in seg.split(".") if part)


def _torch_entries(graph: ModelGraph) -> Dict[str, List[str]]:
    found: Dict[str, List[str]] = {}
    for proto in graph.model.graph.node:
        props = proto.metadata_props
        if not props:  # most nodes of most models: no iterator made
            continue
        for prop in props:
            if prop.key == TORCH_SCOPES:
                try:
                    value = ast.literal_eval(prop.value)  # a Python list literal; literal_eval runs no code
                except (ValueError, SyntaxError):
                    continue
                if isinstance(value, list) and all(isinstance(v, str) for v in value):
                    found[proto.name] = value
    return found


def node_scopes(graph: ModelGraph) -> Tuple[Dict[str, Path], Dict[Path, str], str]:
    """Every top-level node's scope path, the kind of special scopes, and the source used.

    Returns (node name -> path, path -> kind for function/block scopes, source) where source is
    'torch-metadata', 'names' or 'structure'.
    """
    torch_entries = _torch_entries(graph)
    functions = {(f.domain, f.name) for f in graph.model.functions}
    paths: Dict[str, Path] = {}
    kinds: Dict[Path, str] = {}
    by_prefix: Dict[str, Path] = {}  # `a/b/Op` and `a/b/Op_1` share a scope: split each prefix once
    distinct: set = set()  # the scopes of real (not Q/DQ or Constant) nodes: fewer than 2 -> structure
    get_entries = torch_entries.get if torch_entries else None
    for node in graph.nodes:
        node_name = node.name
        entries = get_entries(node_name) if get_entries is not None else None
        if entries is not None:
            path = paths[node_name] = torch_scope(entries)
        else:
            name = node.original_name or node_name
            cut = name.rfind("/")
            if cut < 0 or cut == len(name) - 1:  # no '/', or a trailing one: the last segment is not own name
                path = paths[node_name] = name_scope(node)
            else:
                prefix = name[:cut]
                path = by_prefix.get(prefix)
                if path is None:  # name_scope's '/' case: its segments are the prefix's
                    path = by_prefix[prefix] = _slash_scope([s for s in prefix.split("/") if s])
                paths[node_name] = path
        if path and node.op_type not in TRANSPARENT:
            distinct.add(path)
    source = "torch-metadata" if torch_entries else "names"
    if len(distinct) < 2 and not functions:
        paths, kinds = structural_scopes(graph)
        source = "structure"
    attach_transparent(graph, paths)
    if functions:
        for node in graph.nodes:
            if (node.domain, node.op_type) in functions:
                path = paths[node.name] + (node.name.rsplit("/", 1)[-1] or node.op_type,)
                paths[node.name] = path
                kinds[path] = "function"
    return paths, kinds, source


def scope_name(path: Path) -> str:
    """The display name of a scope path ('' is the model itself)."""
    return "/".join(path)


def attach_transparent(graph: ModelGraph, paths: Dict[str, Path]) -> None:
    """Give Q/DQ and Constant nodes the scope of the first real node they feed (else of their producer)."""
    resolved: Dict[str, Path] = {}
    for node in graph.nodes:
        if node.op_type in TRANSPARENT:
            path = _served(graph, paths, resolved, node)
            if path is None:
                producer = next((graph.producer[t] for t in node.inputs if t in graph.producer), None)
                path = paths.get(producer.name, ()) if producer is not None else ()
            paths[node.name] = path


def _served(graph: ModelGraph, paths: Dict[str, Path], resolved: Dict[str, Path], node: NodeInfo,
            seen: int = 0) -> Optional[Path]:
    """The scope of the first real node `node` feeds (`attach_transparent`). A module function, not a
    closure: a closure calling itself is a reference cycle, which held the graph until the cyclic
    collector ran (`mi inspect` pauses it), so a loaded model was not freed when its users let go."""
    if node.op_type not in TRANSPARENT:
        return paths.get(node.name)
    if node.name in resolved or seen > 8:
        return resolved.get(node.name)
    for out in node.outputs:
        for consumer in graph.consumers.get(out, []):
            found = _served(graph, paths, resolved, consumer, seen + 1)
            if found is not None:
                resolved[node.name] = found
                return found
    return None
