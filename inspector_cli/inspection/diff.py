"""`mi inspect A --diff B`: two scope trees aligned scope by scope, and what changed in each.

Alignment is self-contained (no tensor pairing, nothing run): children of two aligned scopes pair
by name first, then the rest in topological order by the similarity of their op mixes (quantised
and fused spellings count as the op they implement). Inside an aligned pair, the two op
sequences (Q/DQ left out, counted apart) are aligned with difflib: equal runs are unchanged,
one-for-one replacements are `replaced`, several ops of A done by fewer of B that A's ops include
(Conv+BatchNormalization -> Conv) are `fused`, and the rest is added or removed. Boundary tensors
are compared by position for dtype and shape.
"""
from __future__ import annotations

import difflib
from collections import Counter
from typing import Dict, List, Optional, Tuple

from ..core.graph import ModelGraph
from ..core.scope_tree import Scope, ScopeTree
from ..core.types import format_shape
from ..results.inspect import ScopeChange

QDQ = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"}
# Ops that a runtime or converter folds into the op before them.
FOLDABLE = {"BatchNormalization", "Relu", "Add", "Mul", "Clip", "Sigmoid", "Identity", "Cast", "LeakyRelu"}
_PREFIXES = ("QLinear", "Fused", "DynamicQuant", "Q")


def base_op(op: str) -> str:
    """QLinearConv, FusedConv -> Conv; MatMulInteger -> MatMul; other ops unchanged."""
    for prefix in _PREFIXES:
        if op.startswith(prefix) and len(op) > len(prefix) and op[len(prefix)].isupper() and op not in QDQ:
            return op[len(prefix):]
    return op[:-7] if op.endswith("Integer") else op


def _ops(graph: ModelGraph, scope: Scope) -> List[str]:
    return [base_op(graph.node_by_name[n].op_type) for n in scope.nodes
            if graph.node_by_name[n].op_type not in QDQ and graph.node_by_name[n].op_type != "Constant"]


def _similarity(a: Scope, b: Scope) -> float:
    ca = Counter({base_op(k): v for k, v in a.ops.items() if k not in QDQ})
    cb = Counter({base_op(k): v for k, v in b.ops.items() if k not in QDQ})
    # coverage of the smaller op mix: B may have folded BatchNormalization/Relu into A's Convs
    smaller = min(sum(ca.values()), sum(cb.values()))
    return sum((ca & cb).values()) / smaller if smaller else 0.0


def align_children(a: Scope, b: Scope) -> List[Tuple[Optional[Scope], Optional[Scope], str]]:
    """Pairs of children (A, B, how): by name, then by op mix in topological order; leftovers unpaired."""
    a_kids = sorted(a.children.values(), key=lambda s: s.first)
    b_kids = sorted(b.children.values(), key=lambda s: s.first)
    pairs: List[Tuple[Optional[Scope], Optional[Scope], str]] = []
    # structural blocks are numbered, not named: they pair by structure only
    b_by_name = {s.path[-1]: s for s in b_kids if s.kind != "block"}
    used: set = set()
    rest_a = []
    for child in a_kids:
        other = b_by_name.get(child.path[-1]) if child.kind != "block" else None
        if other is not None:
            pairs.append((child, other, "name"))
            used.add(other.path)
        else:
            rest_a.append(child)
    rest_b = [s for s in b_kids if s.path not in used]
    j = 0
    for child in rest_a:
        best, best_k = 0.5, None
        for k in range(j, len(rest_b)):
            score = _similarity(child, rest_b[k])
            if score > best:
                best, best_k = score, k
        if best_k is None:
            pairs.append((child, None, "unmatched"))
            continue
        for k in range(j, best_k):
            pairs.append((None, rest_b[k], "unmatched"))
        pairs.append((child, rest_b[best_k], "structure"))
        j = best_k + 1
    pairs.extend((None, s, "unmatched") for s in rest_b[j:])
    return pairs


def _op_changes(a_ops: List[str], b_ops: List[str]) -> Tuple[Dict[str, int], Dict[str, int], List[str], List[str]]:
    added: Counter = Counter()
    removed: Counter = Counter()
    replaced: List[str] = []
    fused: List[str] = []
    # Trim the common prefix and suffix first: in a stack of identical layers the longest common
    # block is often shifted by one layer, which would report every op as removed and added.
    head = 0
    while head < min(len(a_ops), len(b_ops)) and a_ops[head] == b_ops[head]:
        head += 1
    tail = 0
    while tail < min(len(a_ops), len(b_ops)) - head and a_ops[-1 - tail] == b_ops[-1 - tail]:
        tail += 1
    matcher = difflib.SequenceMatcher(a=a_ops[head:len(a_ops) - tail], b=b_ops[head:len(b_ops) - tail],
                                      autojunk=False)
    for tag, i1, i2, j1, j2 in ((t, i1 + head, i2 + head, j1 + head, j2 + head)
                                for t, i1, i2, j1, j2 in matcher.get_opcodes()):
        left, right = a_ops[i1:i2], b_ops[j1:j2]
        if tag == "equal":
            continue
        if tag == "replace" and len(left) == len(right):
            replaced.extend(f"{x} -> {y}" for x, y in zip(left, right))
        elif tag == "replace" and len(left) > len(right) and set(right) <= set(left):
            fused.append(f"{'+'.join(left)} -> {'+'.join(right)}")
        elif tag == "delete" and i1 > 0 and set(left) <= FOLDABLE:
            fused.append(f"{'+'.join([a_ops[i1 - 1]] + left)} -> {a_ops[i1 - 1]}")
        else:
            removed.update(left)
            added.update(right)
    return dict(added), dict(removed), replaced, fused


def _boundary(graph_a: ModelGraph, graph_b: ModelGraph, a: Scope, b: Scope) -> List[str]:
    changes: List[str] = []
    if not a.path:  # the model itself: its inputs and outputs
        sides = [("in", graph_a.input_names, graph_b.input_names), ("out", graph_a.output_names, graph_b.output_names)]
    else:
        sides = [("in", list(a.inputs), list(b.inputs)), ("out", list(a.outputs), list(b.outputs))]
    for side, ta_list, tb_list in sides:
        ta_list = [t for t in ta_list if graph_a.producer.get(t) is None or graph_a.producer[t].op_type not in QDQ]
        tb_list = [t for t in tb_list if graph_b.producer.get(t) is None or graph_b.producer[t].op_type not in QDQ]
        for ta, tb in zip(ta_list, tb_list):
            ia, ib = graph_a.tensor_info(ta), graph_b.tensor_info(tb)
            da = f"{ia.dtype_name}{format_shape(ia.shape)}"
            db = f"{ib.dtype_name}{format_shape(ib.shape)}"
            if da != db:
                changes.append(f"{side} {ta}: {da} -> {db}")
    return changes


def _change(graph_a: ModelGraph, graph_b: ModelGraph, a: Optional[Scope], b: Optional[Scope],
            how: str) -> ScopeChange:
    if a is None or b is None:
        present = a if a is not None else b
        assert present is not None
        graph = graph_a if a is not None else graph_b
        ops = dict(Counter(graph.node_by_name[n].op_type for n in present.nodes))
        return ScopeChange(scope=a.name if a is not None else "", other=b.name if b is not None else "",
                           matched_by="unmatched", nodes_a=a.count if a else 0, nodes_b=b.count if b else 0,
                           changed=True, added=ops if a is None else {}, removed=ops if b is None else {},
                           summary="only in B" if a is None else "only in A")
    added, removed, replaced, fused = _op_changes(_ops(graph_a, a), _ops(graph_b, b))
    qdq = sum(v for k, v in b.ops.items() if k in QDQ) - sum(v for k, v in a.ops.items() if k in QDQ)
    boundary = _boundary(graph_a, graph_b, a, b)
    parts = [f"replaced {', '.join(replaced)}"] if replaced else []
    parts += [f"fused {', '.join(fused)}"] if fused else []
    parts += ["added " + ", ".join(f"{k} x{v}" for k, v in added.items())] if added else []
    parts += ["removed " + ", ".join(f"{k} x{v}" for k, v in removed.items())] if removed else []
    parts += [f"Q/DQ {qdq:+d}"] if qdq else []
    parts += [f"{len(boundary)} boundary tensor(s) changed type/shape"] if boundary else []
    return ScopeChange(scope=a.name, other=b.name, matched_by=how, nodes_a=a.count, nodes_b=b.count,
                       changed=bool(parts), added=added, removed=removed, replaced=replaced, fused=fused,
                       qdq_inserted=max(qdq, 0), boundary=boundary, summary="; ".join(parts) or "same")


def diff_trees(graph_a: ModelGraph, tree_a: ScopeTree, graph_b: ModelGraph, tree_b: ScopeTree,
               depth: int) -> List[ScopeChange]:
    """Per aligned scope down to `depth`: what B changed; differing scopes first, then in A's order."""
    changes: List[ScopeChange] = [_change(graph_a, graph_b, tree_a.root, tree_b.root, "name")]
    queue: List[Tuple[Scope, Scope, int]] = [(tree_a.root, tree_b.root, 0)]
    while queue:
        a, b, level = queue.pop(0)
        if level >= depth:
            continue
        for child_a, child_b, how in align_children(a, b):
            changes.append(_change(graph_a, graph_b, child_a, child_b, how))
            if child_a is not None and child_b is not None:
                queue.append((child_a, child_b, level + 1))
    order = {c.scope or c.other: i for i, c in enumerate(changes)}
    return sorted(changes, key=lambda c: (not c.changed, c.scope == "", order[c.scope or c.other]))
