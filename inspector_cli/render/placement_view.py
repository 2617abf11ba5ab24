"""The placement table: nodes and kernel time per execution provider, transfers, fallback ops."""
from __future__ import annotations

from typing import List, Optional, Sequence

from ..results.placement import CPU, PartitionChange, Placement
from .numbers import fmt_us
from .table import WARN, Cell, Table

SHOWN_FALLBACK = 12


def placement_table(placement: Optional[Placement], title: Optional[str] = None) -> Optional[Table]:
    """One row per provider (nodes, share of nodes, time per run, share of time), then one row per
    kind of transfer (MemcpyToHost / MemcpyFromHost); the fallback ops in the caption."""
    if placement is None:
        return None
    timed = any(share.time_us is not None for share in placement.providers)
    columns = ["provider", "nodes", "node share"] + (["time", "time share"] if timed else [])
    table = Table(title=title or f"placement of {placement.session}", columns=columns,
                  numeric=[False] + [True] * (len(columns) - 1))
    for share in placement.providers:
        provider = Cell(share.provider, WARN) if share.provider != placement.requested else share.provider
        cells = [provider, str(share.nodes), f"{share.node_share:.1%}"]
        if timed:  # measured by `mi profile` only: the other commands run no profiler
            cells += [fmt_us(share.time_us) if share.time_us is not None else "-",
                      f"{share.time_share:.1%}" if share.time_share is not None else "-"]
        table.add(*cells)
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


def placement_tables(placements: Sequence[Placement], required: Optional[str] = None) -> List[Table]:
    """The placement table of each session of a compare, probe or nan-bisect, when it says something:
    a provider other than CPU was asked for or ran, or `--require-provider` was given. A CPU-only
    run's placement (every node on CPU) stays in the JSON only."""
    if not required and all(p.requested == CPU and all(s.provider == CPU for s in p.providers) for p in placements):
        return []
    tables = [placement_table(p, f"placement of {p.session}") for p in placements]
    return [t for t in tables if t is not None]


def partition_notes(changes: Sequence[PartitionChange], keep: Optional[str] = None) -> List[str]:
    """One line per model whose partition changed when tensors were exposed (and one saying it held);
    `keep`: the command's read that keeps the plain partition."""
    return [("warning: " if c.changed else "") + (c.line(keep) if keep else c.line()) for c in changes]
