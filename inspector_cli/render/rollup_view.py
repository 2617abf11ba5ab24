"""The `--group-by scope` table of compare --layers, probe and nan-bisect, shown before their own tables.

The rows come from the result's scope section (`results/scope_section.py`); with more scopes than
fit, the worst ones are kept (by the command's main metric) and shown in the model's order, so the
table still reads top to bottom like the model.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, List, Optional

from .table import Table, View, fmt_value

if TYPE_CHECKING:  # annotations only: a result without scopes (outputs-only compare) never imports it
    from ..results.scopes import RollupRow

TOP = 12


def _count(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{int(value):,}"


def _share(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _badness(kind: str, row: RollupRow) -> float:
    v = row.values
    if kind == "compare":
        cosine = v.get("cosine")
        return 2.0 - cosine if cosine is not None else 0.0
    if kind == "probe":
        return ((v.get("nonfinite") or 0.0) * 1e9 + (v.get("saturation_share") or 0.0) * 1e6
                + (v.get("dead_units") or 0.0))
    return v.get("origin_samples") or 0.0


COLUMNS = {
    "compare": (["scope", "layers", "worst cosine", "worst SQNR dB", "diverged", "first divergence", "max own share"],
                lambda r: [_count(r.rows), fmt_value(r.values.get("cosine"), "cosine"),
                           fmt_value(r.values.get("sqnr"), "sqnr"), _count(r.values.get("diverged")),
                           r.labels.get("first_divergence", "-"), _share(r.values.get("own_share"))]),
    "probe": (["scope", "tensors", "non-finite", "dead units", "max zero share", "saturation"],
              lambda r: [_count(r.values.get("tensors")), _count(r.values.get("nonfinite")),
                         _count(r.values.get("dead_units")), _share(r.values.get("zero_frac")),
                         _share(r.values.get("saturation_share"))]),
    "nan-bisect": (["scope", "origins", "samples born in it"],
                   lambda r: [_count(r.values.get("origins")), _count(r.values.get("origin_samples"))]),
}


def rollup_table(result: Any, top: int = TOP) -> Optional[Table]:
    """The roll-up of `result` by scope (None when it has none): the `top` worst scopes in model order."""
    section = getattr(result, "scopes", None)
    if section is None or result.kind not in COLUMNS or not section.rollup:
        return None
    columns, cells = COLUMNS[result.kind]
    rows: List[RollupRow] = section.rollup
    if len(rows) > top:
        keep = {id(r) for r in sorted(rows, key=lambda r: -_badness(result.kind, r))[:top]}
        rows = [r for r in rows if id(r) in keep]
    depth = "leaf scopes" if section.depth is None else f"depth {section.depth}"
    table = Table(title=f"by scope ({depth}, scopes from {section.map.source})", columns=columns,
                  numeric=[False] + [True] * (len(columns) - 1))
    for row in rows:
        table.add(row.scope or "(model)", *cells(row))
    if len(section.rollup) > len(rows):
        table.caption = f"the {len(rows)} worst of {len(section.rollup)} scopes; all are in the JSON"
    return table


def with_rollup(builder: Callable[[Any], View]) -> Callable[[Any], View]:
    """`builder`, with the roll-up table first when the result was grouped (`--group-by scope`)."""
    def build(result: Any) -> View:
        view = builder(result)
        section = getattr(result, "scopes", None)
        if section is not None and section.group_by:
            table = rollup_table(result)
            if table is not None:
                view.tables.insert(0, table)
        return view
    return build
