"""The placement table: nodes and kernel time per execution provider, transfers, fallback ops."""
from __future__ import annotations

from typing import List, Optional

from ..results.placement import Placement
from .numbers import fmt_us
from .table import WARN, Cell, Table

SHOWN_FALLBACK = 12


def placement_table(placement: Optional[Placement], title: Optional[str] = None) -> Optional[Table]:
    """One row per provider (nodes, share of nodes, time per run, share of time), then one row per
    kind of transfer (MemcpyToHost / MemcpyFromHost); the fallback ops in the caption."""
    if placement is None:
        return None
    table = Table(title=title or f"placement of {placement.session}",
                  columns=["provider", "nodes", "node share", "time", "time share"],
                  numeric=[False, True, True, True, True])
    for share in placement.providers:
        provider = Cell(share.provider, WARN) if share.provider != placement.requested else share.provider
        table.add(provider, str(share.nodes), f"{share.node_share:.1%}",
                  fmt_us(share.time_us) if share.time_us is not None else "-",
                  f"{share.time_share:.1%}" if share.time_share is not None else "-")
    for transfer in placement.transfers:
        table.add(f"transfer {transfer.provider}", f"{transfer.nodes} kernels", "-",
                  fmt_us(transfer.time_us or 0.0), f"{transfer.time_share or 0.0:.1%}")
    table.caption = _caption(placement)
    return table


def _caption(placement: Placement) -> str:
    parts: List[str] = [(f"asked for {placement.requested}; {placement.subgraphs} partition(s); "
                         f"read from onnxruntime's {placement.source}")]
    if placement.fallback:
        ops: dict = {}
        for f in placement.fallback:
            ops.setdefault(f.op_type, []).append(f.node)
        shown = ", ".join(f"{op} x{len(nodes)}" for op, nodes in list(ops.items())[:SHOWN_FALLBACK])
        parts.append(f"{len(placement.fallback)} node(s) fell back: {shown}")
    return "; ".join(parts)
