"""Inline SVG charts for the HTML report: no JavaScript, no network, every label escaped.

Functions return `markupsafe.Markup` built only from numbers we computed and `escape`d strings, so
the templates can insert them while autoescaping stays on for everything else.
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence, Tuple

from markupsafe import Markup
from markupsafe import escape as _html_escape

from .safe import visible


def escape(text: object) -> Markup:
    """HTML-escaped, with control characters from model names made visible (see render/safe.py)."""
    return _html_escape(visible(text))

PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2"]
LABEL_CHAR_W = 7.0   # px per character of an 11px bold label (a generous estimate: boxes must not touch)
LABEL_H = 14.0       # px per label row
DOT_R = 6.0          # half the side of the box kept free around a marker's dot (r=4.5, plus a margin)


def _free_row(placed: Sequence[Tuple[float, float, float, float]], x0: float, x1: float, want: float,
              low: float, high: float) -> float:
    """The baseline nearest `want` (in label-row steps, down first) whose box overlaps no placed box."""
    def clear(base: float) -> bool:
        y0, y1 = base - LABEL_H + 2, base + 2
        return all(x1 <= a0 or x0 >= a1 or y1 <= b0 or y0 >= b1 for a0, b0, a1, b1 in placed)

    for step in range(0, 40):
        for base in (want + step * LABEL_H, want - step * LABEL_H):
            if low + LABEL_H - 2 <= base <= high + LABEL_H and clear(base):
                return base
    return want


def _finite(values: Sequence[Optional[float]]) -> List[float]:
    return [v for v in values if v is not None and math.isfinite(v)]


def _fmt(value: float) -> str:
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 1000 or magnitude < 0.01:
        return f"{value:.2e}"
    return f"{value:.4g}"


def bar_chart(items: Sequence[Tuple[str, float]], *, unit: str = "", width: int = 720,
              bar_height: int = 18, color: str = PALETTE[0], label_width: int = 260,
              title: str = "") -> Markup:
    """Horizontal bars, largest first as given; labels on the left, values on the right."""
    rows = [(label, value) for label, value in items if value is not None and math.isfinite(value)]
    if not rows:
        return Markup("")
    peak = max(abs(v) for _, v in rows) or 1.0
    plot = width - label_width - 90
    height = len(rows) * (bar_height + 6) + 10
    parts = [f'<svg class="chart bar-chart" role="img" viewBox="0 0 {width} {height}" width="100%" '
             f'preserveAspectRatio="xMinYMin meet" xmlns="http://www.w3.org/2000/svg">']
    if title:
        parts.append(f"<title>{escape(title)}</title>")
    for i, (label, value) in enumerate(rows):
        y = 5 + i * (bar_height + 6)
        length = max(1.0, plot * abs(value) / peak)
        short = label if len(label) <= 40 else "…" + label[-39:]
        parts.append(f'<text x="{label_width - 6}" y="{y + bar_height * 0.75:.1f}" text-anchor="end" '
                     f'class="label">{escape(short)}<title>{escape(label)}</title></text>')
        parts.append(f'<rect x="{label_width}" y="{y}" width="{length:.1f}" height="{bar_height}" fill="{color}" rx="2"/>')
        parts.append(f'<text x="{label_width + length + 6:.1f}" y="{y + bar_height * 0.75:.1f}" class="value">'
                     f'{escape(_fmt(value))}{escape(unit)}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def line_chart(series: Dict[str, Sequence[Optional[float]]], *, labels: Sequence[str] = (), width: int = 960,
               height: int = 260, markers: Optional[Dict[int, str]] = None, y_label: str = "",
               threshold: Optional[float] = None, title: str = "", x_label: str = "") -> Markup:
    """Lines over an index axis (e.g. layers in topological order), optional marked points and a threshold."""
    values = [v for seq in series.values() for v in _finite(seq)]
    count = max((len(s) for s in series.values()), default=0)
    if not values or count == 0:
        return Markup("")
    low, high = min(values), max(values)
    if threshold is not None and math.isfinite(threshold):
        low, high = min(low, threshold), max(high, threshold)
    if high == low:
        high, low = high + 1e-9 + abs(high) * 1e-3, low - 1e-9 - abs(low) * 1e-3
    left, right, top, bottom = 64, 16, 16, 28
    plot_w, plot_h = width - left - right, height - top - bottom

    def x(i: int) -> float:
        return left + (plot_w * i / max(count - 1, 1))

    def y(v: float) -> float:
        return top + plot_h * (1 - (v - low) / (high - low))

    parts = [f'<svg class="chart line-chart" role="img" viewBox="0 0 {width} {height}" width="100%" '
             f'preserveAspectRatio="xMinYMin meet" xmlns="http://www.w3.org/2000/svg">']
    if title:
        parts.append(f"<title>{escape(title)}</title>")
    parts.append(f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" class="axis"/>')
    parts.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" class="axis"/>')
    for v in (low, (low + high) / 2, high):
        parts.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end" class="tick">{escape(_fmt(v))}</text>')
    if y_label:
        parts.append(f'<text x="12" y="{top + plot_h / 2:.1f}" class="tick" transform="rotate(-90 12 {top + plot_h / 2:.1f})" '
                     f'text-anchor="middle">{escape(y_label)}</text>')
    parts.append(f'<text x="{left + plot_w / 2:.1f}" y="{height - 6}" text-anchor="middle" class="tick">'
                 f'{escape(x_label or f"layer (topological order, {count})")}</text>')
    if threshold is not None and math.isfinite(threshold):
        parts.append(f'<line x1="{left}" y1="{y(threshold):.1f}" x2="{left + plot_w}" y2="{y(threshold):.1f}" class="threshold"/>')
    for color, (name, seq) in zip(PALETTE, series.items()):
        points, segments = [], []
        for i, v in enumerate(seq):
            if v is None or not math.isfinite(v):
                if points:
                    segments.append(points)
                points = []
                continue
            points.append(f"{x(i):.1f},{y(v):.1f}")
        if points:
            segments.append(points)
        for seg in segments:
            parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.6" points="{" ".join(seg)}">'
                         f"<title>{escape(name)}</title></polyline>")
    first = next(iter(series.values()))
    shown = sorted((i, t) for i, t in (markers or {}).items()
                   if 0 <= i < len(first) and first[i] is not None and math.isfinite(first[i]))  # type: ignore[arg-type]
    # Boxes a label must not cover, x0, y0, x1, y1: every marker's dot (a label drawn over another
    # layer's dot reads as that layer's label), then each label as it is placed.
    placed: List[Tuple[float, float, float, float]] = [
        (x(i) - DOT_R, y(first[i]) - DOT_R, x(i) + DOT_R, y(first[i]) + DOT_R) for i, _ in shown]  # type: ignore[arg-type]
    for index, text in shown:
        cx, cy = x(index), y(first[index])  # type: ignore[arg-type]
        name = labels[index] if index < len(labels) else ""
        parts.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4.5" class="marker"><title>{escape(text)}: '
                     f'{escape(name)}</title></circle>')
        short = text if len(text) <= 48 else text[:47] + "…"
        right_half = cx > left + plot_w * 0.6  # label on the side with room
        box_w = LABEL_CHAR_W * len(short)
        x0 = cx - 8 - box_w if right_half else cx + 8
        ty = _free_row(placed, x0, x0 + box_w, max(cy - 8, 12.0), top, top + plot_h)
        placed.append((x0, ty - LABEL_H + 2, x0 + box_w, ty + 2))
        if abs(ty - max(cy - 8, 12.0)) > 1:  # moved away from its point: a leader line keeps them together
            parts.append(f'<line x1="{cx:.1f}" y1="{cy:.1f}" x2="{(x0 + box_w if right_half else x0):.1f}" '
                         f'y2="{ty - 4:.1f}" class="leader"/>')
        anchor, tx = ("end", cx - 8) if right_half else ("start", cx + 8)
        parts.append(f'<text x="{tx:.1f}" y="{ty:.1f}" text-anchor="{anchor}" class="marker-label">'
                     f'{escape(short)}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def sparkline(counts: Sequence[float], *, width: int = 120, height: int = 24) -> Markup:
    """A small histogram (bars) for a table cell."""
    values = [max(0.0, float(c)) for c in counts]
    if not values or max(values) == 0:
        return Markup("")
    peak = max(values)
    bar = width / len(values)
    rects = "".join(f'<rect x="{i * bar:.2f}" y="{height - height * v / peak:.2f}" width="{max(bar - 0.5, 0.5):.2f}" '
                    f'height="{height * v / peak:.2f}"/>' for i, v in enumerate(values) if v > 0)
    return Markup(f'<svg class="sparkline" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
                  f'xmlns="http://www.w3.org/2000/svg">{rects}</svg>')
