"""HTML at a glance: chart labels never overlap, names wrap only at separators (issue 20)."""
from __future__ import annotations

import re

from inspector_cli.render.html import wbr
from inspector_cli.render.svg import LABEL_CHAR_W, LABEL_H, line_chart


def label_boxes(svg: str) -> list[tuple[float, float, float, float]]:
    boxes = []
    for x, y, anchor, text in re.findall(r'<text x="([\d.]+)" y="([\d.]+)" text-anchor="(\w+)" '
                                         r'class="marker-label">([^<]*)</text>', svg):
        width = LABEL_CHAR_W * len(text.replace("&amp;", "&"))
        x0 = float(x) - width if anchor == "end" else float(x)
        boxes.append((x0, float(y) - LABEL_H + 2, x0 + width, float(y) + 2))
    return boxes


def test_labels_of_neighbouring_markers_are_stacked_apart():
    values = [0.999 - 0.0001 * i for i in range(60)]
    markers = {57: "worst: bn_57_out", 58: "first divergence", 59: "worst: relu_59_out", 3: "worst: conv_3"}
    svg = str(line_chart({"cosine": values}, labels=[f"t{i}" for i in range(60)], markers=markers))
    boxes = label_boxes(svg)
    assert len(boxes) == 4
    for i, (l1, t1, r1, b1) in enumerate(boxes):
        for l2, t2, r2, b2 in boxes[i + 1:]:
            assert r1 <= l2 or r2 <= l1 or b1 <= t2 or b2 <= t1, boxes
    assert svg.count('class="leader"') >= 1  # a moved label keeps a line to its point


def test_names_get_break_opportunities_only_after_separators():
    assert str(wbr("backbone/layer4.conv_2:0")) == "backbone/<wbr>layer4.<wbr>conv_<wbr>2:<wbr>0"
    assert str(wbr("qdq 0.90")) == "qdq 0.90"  # numbers stay whole
    assert str(wbr("<script>x_y")) == "&lt;script&gt;x_<wbr>y"  # still escaped


def test_labels_keep_clear_of_other_markers_dots():
    # the demo's shape: three worst layers close together on a nearly flat line
    values = [1.0, 0.9999, 0.9998, 0.9997, 0.9998, 0.9995, 0.9993, 0.9995, 0.9991, 0.9991, 0.9995, 0.9996]
    markers = {6: "worst: /15/Relu_output_0", 8: "worst: /19/Relu_output_0", 9: "worst: /22/Relu_output_0"}
    svg = str(line_chart({"cosine": values}, labels=[f"t{i}" for i in range(12)], markers=markers))
    dots = [(float(cx), float(cy)) for cx, cy in re.findall(r'<circle cx="([\d.]+)" cy="([\d.]+)" r="4.5"', svg)]
    assert len(dots) == 3
    for l, t, r, b in label_boxes(svg):
        for cx, cy in dots:
            assert r <= cx - 4.5 or l >= cx + 4.5 or b <= cy - 4.5 or t >= cy + 4.5, ((l, t, r, b), (cx, cy))
