"""The HTML map: a result's per-node metric painted over the scope tree, as nested `<details>` (no JS).

Works for any result that carries a `scope_map` (node -> scope) and `node_values()`: each scope's
row is coloured by the metric rolled up over its nodes (a sum for additive metrics such as time,
FLOPs and bytes, shown as a share of the model; the worst value otherwise), the worst scopes are
open by default, and every scope of at most ~150 nodes that is the largest such scope on its
branch gets a static SVG of its nodes (render/graph_svg.py). Two-model results (`inspect --diff`)
show A and B side by side with the change of each aligned scope.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from markupsafe import Markup, escape

from ..results.base import NodeValues
from ..results.scopes import ScopeInfo, ScopeMap, scope_totals
from .graph_svg import MAX_NODES, subgraph_svg
from .safe import visible
from .table import fmt_value

ADDITIVE_SUFFIXES = ("_us", "_bytes", "flops", "params", "count", "share", "kernels", "origins")
SHARE_STEPS = (0.01, 0.05, 0.15, 0.40)
RELATIVE_STEPS = (0.2, 0.4, 0.6, 0.8)
OPEN_CHILDREN = 2


def _text(value: object) -> Markup:
    """A model-supplied string for HTML: control characters made visible, then escaped."""
    return escape(visible(value))


def is_additive(metric: str) -> bool:
    return metric.endswith(ADDITIVE_SUFFIXES)


def _bucket(badness: Optional[float], steps: Tuple[float, ...]) -> str:
    if badness is None:
        return "cn"
    return f"c{sum(1 for s in steps if badness >= s)}"


class _Painter:
    """Turns scope and node values into badness in [0, 1] and colour classes c0 (good) .. c4 (bad)."""

    def __init__(self, nv: NodeValues, smap: ScopeMap) -> None:
        self.metric = nv.metric
        self.additive = is_additive(nv.metric) and not nv.higher_is_better
        how = "sum" if self.additive else ("min" if nv.higher_is_better else "max")
        self.totals = scope_totals(smap.node_scope, nv.values, how)
        self.node_values = nv.values
        self.higher_is_better = nv.higher_is_better
        finite = [v for v in self.totals.values() if v is not None]
        self.lo, self.hi = (min(finite), max(finite)) if finite else (0.0, 0.0)
        self.root = self.totals.get("") or 0.0
        self.steps = SHARE_STEPS if self.additive else RELATIVE_STEPS

    def badness(self, value: Optional[float]) -> Optional[float]:
        if value is None:
            return None
        if self.additive:
            return value / self.root if self.root else 0.0
        span = self.hi - self.lo
        if not span:
            return 0.0
        return (self.hi - value) / span if self.higher_is_better else (value - self.lo) / span

    def scope_class(self, path: str) -> str:
        return _bucket(self.badness(self.totals.get(path)), self.steps)

    def node_classes(self, names: Sequence[str]) -> Dict[str, str]:
        values = [self.node_values[n] for n in names if n in self.node_values]
        if not values:
            return {}
        lo, hi = min(values), max(values)
        out: Dict[str, str] = {}
        for name in names:
            v = self.node_values.get(name)
            if v is None:
                continue
            rel = 0.0 if hi == lo else ((hi - v) / (hi - lo) if self.higher_is_better else (v - lo) / (hi - lo))
            out[name] = _bucket(rel, RELATIVE_STEPS)
        return out

    def label_node(self, name: str) -> str:
        value = self.node_values.get(name)
        return "" if value is None else f"{self.metric} {fmt_value(value, self.metric)}"

    def label(self, path: str) -> str:
        value = self.totals.get(path)
        if value is None:
            return "n/a"
        text = fmt_value(value, self.metric)
        return f"{text} ({value / self.root:.0%})" if self.additive and self.root else text

    def legend(self) -> Markup:
        if self.additive:
            texts = ["<1%", "1-5%", "5-15%", "15-40%", "≥40%"]
            what = f"{self.metric}: sum over the scope's nodes, as a share of the model"
        else:
            texts = ["best", "", "", "", "worst"]
            what = f"{self.metric}: {'lowest' if self.higher_is_better else 'highest'} value in the scope"
        keys = "".join(f'<span class="key c{i}">{escape(t) or "&nbsp;"}</span>' for i, t in enumerate(texts))
        return Markup(f'<p class="legend">Colour: {escape(what)} {keys}</p>')


def _nodes_by_scope(nodes: Sequence[object]) -> Dict[str, List[object]]:
    found: Dict[str, List[object]] = {}
    for node in nodes:
        parts = node.scope.split("/") if node.scope else []  # type: ignore[attr-defined]
        for depth in range(len(parts) + 1):
            found.setdefault("/".join(parts[:depth]), []).append(node)
    return found


def map_html(smap: ScopeMap, nv: NodeValues, nodes: Sequence[object] = (), *,
             other: Optional[Tuple[ScopeMap, Sequence[object]]] = None,
             changes: Optional[Dict[str, object]] = None) -> Markup:
    """The map section: legend, then the scope tree with drawings of small scopes."""
    painter = _Painter(nv, smap)
    by_path = {s.path: s for s in smap.scopes}
    members = _nodes_by_scope(nodes)
    other_members = _nodes_by_scope(other[1]) if other else {}
    out: List[str] = [f'<div class="smap">{painter.legend()}']

    def drawing(scope: ScopeInfo, change: object) -> str:
        drawn = members.get(scope.path, [])
        svg_a = subgraph_svg(drawn, painter.node_classes([n.name for n in drawn]),  # type: ignore[attr-defined]
                             {n.name: painter.label_node(n.name) for n in drawn},  # type: ignore[attr-defined]
                             title=scope.path or "model")
        if other is None or change is None or change.matched_by == "unmatched":  # type: ignore[attr-defined]
            return str(svg_a)
        svg_b = subgraph_svg(other_members.get(change.other, []), title=change.other)  # type: ignore[attr-defined]
        label_b = _text(change.other or "(model)")  # type: ignore[attr-defined]
        return (f'<div class="pair"><div><p class="m">A</p>{svg_a}</div>'
                f'<div><p class="m">B: {label_b}</p>{svg_b}</div></div>')

    def render(scope: ScopeInfo, opened: bool, parent_big: bool) -> None:
        cls = painter.scope_class(scope.path)
        ops = ", ".join(f"{op}×{n}" if n > 1 else op for op, n in list(scope.ops.items())[:3])
        change = changes.get(scope.path) if changes else None
        badge = ""
        if change is not None:
            badge = f' <span class="chg {"on" if change.changed else "off"}">{_text(change.summary)}</span>'  # type: ignore[attr-defined]
        name = scope.name if scope.depth else "(model)"
        out.append(f'<details{" open" if opened else ""}><summary class="{cls}"><b>{_text(name)}</b> '
                   f'<span class="v">{escape(painter.label(scope.path))}</span> '
                   f'<span class="m">{scope.nodes} nodes · {_text(ops)}</span>{badge}</summary><div class="sb">')
        kids = [by_path[c] for c in scope.children if c in by_path]
        ranked = sorted(kids, key=lambda k: -(painter.badness(painter.totals.get(k.path)) or 0.0))
        worst = {k.path for k in ranked[:OPEN_CHILDREN]
                 if (painter.badness(painter.totals.get(k.path)) or 0.0) >= painter.steps[1]}
        draw = scope.nodes <= MAX_NODES and parent_big
        for kid in kids:
            render(kid, opened and kid.path in worst, parent_big and not draw)
        if draw:  # after the children, so the tree reads first
            out.append(drawing(scope, change))
        out.append("</div></details>")

    if smap.scopes:
        render(smap.scopes[0], True, True)
    out.append("</div>")
    return Markup("".join(out))

