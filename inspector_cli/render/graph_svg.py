"""A static SVG of a small subgraph (a scope of at most ~150 nodes): layered top to bottom, no JavaScript.

Layout: each node's layer is the longest path to it from the scope's inputs (nodes come in
topological order, so one pass); inside a layer nodes are ordered by the mean position of their
producers (one barycentre sweep), which removes most crossings of a block's branches. Boxes and
text are sized by CSS classes (`.gn`), edges are one `<path>`, names are escaped, so a
150-node drawing stays a few tens of kilobytes.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

from markupsafe import Markup, escape

from .safe import visible

BOX_W, BOX_H, GAP_X, GAP_Y = 112, 26, 14, 26
MAX_NODES = 150


def layout(nodes: Sequence[object]) -> Dict[str, tuple]:
    """name -> (x, y) of each node's box (top-left), for nodes given in topological order."""
    producer: Dict[str, str] = {}
    for node in nodes:
        for out in node.outputs:  # type: ignore[attr-defined]
            producer[out] = node.name  # type: ignore[attr-defined]
    layer: Dict[str, int] = {}
    preds: Dict[str, List[str]] = {}
    for node in nodes:
        inside = [producer[t] for t in node.inputs if t in producer]  # type: ignore[attr-defined]
        preds[node.name] = inside  # type: ignore[attr-defined]
        layer[node.name] = 1 + max((layer[p] for p in inside), default=-1)  # type: ignore[attr-defined]
    rows: Dict[int, List[str]] = {}
    for node in nodes:
        rows.setdefault(layer[node.name], []).append(node.name)  # type: ignore[attr-defined]
    slot: Dict[str, float] = {}
    for depth in sorted(rows):
        names = rows[depth]
        if depth:
            def centre(name: str) -> float:
                ps = [slot[p] for p in preds[name] if p in slot]
                return sum(ps) / len(ps) if ps else float("inf")
            names.sort(key=centre)
        for index, name in enumerate(names):
            slot[name] = float(index)
    return {name: (GAP_X + int(slot[name]) * (BOX_W + GAP_X), GAP_Y // 2 + layer[name] * (BOX_H + GAP_Y))
            for name in layer}


def _short(text: str, limit: int = 16) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def subgraph_svg(nodes: Sequence[object], classes: Optional[Dict[str, str]] = None,
                 values: Optional[Dict[str, str]] = None, title: str = "") -> Markup:
    """The drawing of `nodes` (objects with name, op_type, inputs, outputs) coloured by CSS class per node."""
    if not nodes or len(nodes) > MAX_NODES:
        return Markup("")
    classes = classes or {}
    values = values or {}
    pos = layout(nodes)
    width = max(x for x, _ in pos.values()) + BOX_W + GAP_X + BOX_W // 2
    height = max(y for _, y in pos.values()) + BOX_H + GAP_Y // 2
    producer = {out: n.name for n in nodes for out in n.outputs}  # type: ignore[attr-defined]
    edges: List[str] = []
    for node in nodes:
        x2, y2 = pos[node.name]  # type: ignore[attr-defined]
        for tensor in node.inputs:  # type: ignore[attr-defined]
            source = producer.get(tensor)
            if source is not None:
                x1, y1 = pos[source]
                ax, ay, bx = x1 + BOX_W // 2, y1 + BOX_H, x2 + BOX_W // 2
                if y2 - ay > GAP_Y and ax == bx:  # a skip connection: bow it out so it does not cross boxes
                    edges.append(f"M{ax} {ay}Q{ax + BOX_W} {(ay + y2) // 2} {bx} {y2}")
                else:
                    edges.append(f"M{ax} {ay}L{bx} {y2}")
    parts = [f'<svg class="graph" role="img" viewBox="0 0 {width} {height}" style="max-width:{width}px" '
             f'xmlns="http://www.w3.org/2000/svg"><title>{escape(visible(title))}</title>']
    if edges:
        parts.append(f'<path class="ge" d="{"".join(edges)}"/>')
    for node in nodes:
        name = node.name  # type: ignore[attr-defined]
        x, y = pos[name]
        value = values.get(name)
        tip = f"{name} ({node.op_type})" + (f": {value}" if value else "")  # type: ignore[attr-defined]
        parts.append(f'<g class="gn {classes.get(name, "c0")}" transform="translate({x} {y})">'
                     f'<title>{escape(visible(tip))}</title><rect/><text x="{BOX_W // 2}" y="17">'
                     f'{escape(visible(_short(node.op_type)))}</text></g>')  # type: ignore[attr-defined]
    parts.append("</svg>")
    return Markup("".join(parts))
