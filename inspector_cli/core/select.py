"""Tensor selection: exact names, globs, regular expressions, op types and `all`.

A pattern is matched against tensor names *and* the names of the nodes that produce them, so
`encoder/*/conv*` finds `/encoder/layer.0/conv1/Conv_output_0` through its node name as well.
"""
from __future__ import annotations

import difflib
import fnmatch
import re
from typing import List, Sequence

from ..errors import SelectionError
from .graph import ModelGraph

ALL = "all"
_GLOB_CHARS = set("*?[")


def selectable_tensors(graph: ModelGraph, *, include_constants: bool = False) -> List[str]:
    """Every node output of the top-level graph in topological order (Constant outputs excluded)."""
    names: List[str] = []
    for node, out in graph.node_outputs():
        if node.op_type == "Constant" and not include_constants:
            continue
        names.append(out)
    return list(dict.fromkeys(names))


def select_tensors(graph: ModelGraph, patterns: Sequence[str], *, allow_empty: bool = False) -> List[str]:
    """Tensor names matching any of `patterns`, in topological order, without duplicates.

    Pattern forms: `all`; `op:Relu` or `op:Relu,Conv` (outputs of nodes of those op types);
    `re:<regex>` (Python `re.search` on tensor or node name); a glob with `*`, `?` or `[`;
    otherwise an exact tensor or node name. A pattern that matches nothing raises `SelectionError`
    naming the closest tensor names, unless `allow_empty`.
    """
    candidates = selectable_tensors(graph)
    producer = graph.producer
    chosen: List[str] = []
    for pattern in patterns:
        matched = _match_one(graph, pattern.strip(), candidates)
        if not matched and not allow_empty:
            raise SelectionError(_no_match_message(graph, pattern, candidates))
        chosen.extend(matched)
    unique = list(dict.fromkeys(chosen))
    return sorted(unique, key=lambda t: producer[t].order if t in producer else -1)


def _match_one(graph: ModelGraph, pattern: str, candidates: List[str]) -> List[str]:
    producer = graph.producer
    if pattern == ALL:
        # Graph outputs wired straight to an input (no node produces them) are tensors too: a
        # zero-node model's 'all' is its input, as `mi probe --list` shows.
        # A graph output a Constant produces is a value the model gives (ONNX's test_constant: the only one).
        wired = [o.name for o in graph.model.graph.output
                 if (o.name not in producer and o.name in graph.input_names)
                 or (o.name in producer and producer[o.name].op_type == "Constant")]
        return list(dict.fromkeys([*candidates, *wired]))
    if pattern.startswith("op:"):
        wanted = {p.strip().lower() for p in pattern[3:].split(",") if p.strip()}
        return [t for t in candidates if producer[t].op_type.lower() in wanted]
    if pattern.startswith("re:"):
        try:
            regex = re.compile(pattern[3:])
        except re.error as exc:
            raise SelectionError(f"pattern '{pattern}': invalid regular expression ({exc})") from exc
        return [t for t in candidates if regex.search(t) or regex.search(producer[t].name)]
    if _GLOB_CHARS & set(pattern):
        return [t for t in candidates
                if fnmatch.fnmatchcase(t, pattern) or fnmatch.fnmatchcase(producer[t].name, pattern)]
    if pattern in producer or pattern in graph.input_names:
        return [pattern]
    node = graph.node_by_name.get(pattern)
    if node is not None:
        return [o for o in node.outputs if o]
    return []


def _no_match_message(graph: ModelGraph, pattern: str, candidates: List[str]) -> str:
    close = difflib.get_close_matches(pattern, candidates + list(graph.node_by_name), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return (f"{graph.display_name}: pattern '{pattern}' matches no tensor{hint} "
            f"(use exact names, globs, 're:<regex>', 'op:<OpType>' or 'all'; 'mi probe MODEL --list' shows every name)")
