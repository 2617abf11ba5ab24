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
        # Graph outputs are tensors too when no selectable node makes them: wired straight to an input
        # (a zero-node model's 'all' is its input, as `mi probe --list` shows), a Constant's output or an
        # initializer (a graph that is a single Constant has no other tensor: 'all' is its outputs).
        return list(dict.fromkeys([*candidates, *outputs_outside(graph, candidates)]))
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


def outputs_outside(graph: ModelGraph, candidates: List[str]) -> List[str]:
    """Graph outputs that `selectable_tensors` leaves out (`candidates`): inputs, initializers and Constant
    outputs. `all` selects them, so a graph without an intermediate tensor still has its outputs."""
    listed = set(candidates)
    known = set(graph.input_names) | graph.initializer_names | set(graph.producer)
    return [name for name in graph.output_names if name not in listed and name in known]


def _no_match_message(graph: ModelGraph, pattern: str, candidates: List[str]) -> str:
    close = difflib.get_close_matches(pattern, candidates + list(graph.node_by_name), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return (f"{graph.display_name}: pattern '{pattern}' matches no tensor{hint} "
            f"(use exact names, globs, 're:<regex>', 'op:<OpType>' or 'all'; 'mi probe MODEL --list' shows every name)")
