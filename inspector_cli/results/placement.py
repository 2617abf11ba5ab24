"""Where each node ran: the execution-provider placement of one onnxruntime session.

Built by `core/placement.py` from what onnxruntime itself reports (its graph-assignment record,
and the provider of every kernel event when the session was profiled); pure data here, so a saved
result renders again without onnxruntime.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

CPU = "CPUExecutionProvider"


@dataclass(frozen=True)
class ProviderShare:
    """One provider's part of a session: nodes assigned to it and, when profiled, its kernel time."""

    provider: str
    nodes: int
    node_share: float
    """Fraction of the assigned nodes."""
    time_us: Optional[float] = None
    """Summed kernel time per run (None when the session was not profiled)."""
    time_share: Optional[float] = None


@dataclass(frozen=True)
class FallbackNode:
    """A node that ran on a provider other than the one asked for first."""

    node: str
    op_type: str
    provider: str


@dataclass(frozen=True)
class Placement:
    """The provider of every node of one session, summarised.

    `requested` is the first provider asked for; `fallback` lists the nodes that ran elsewhere
    (usually on CPU), in graph order. `source` says how it was read: `assignment` (onnxruntime's
    record of its partitioning, `session.record_ep_graph_assignment_info`) or `profile` (the
    provider of each kernel event).
    """

    session: str
    requested: str
    source: str
    providers: List[ProviderShare]
    nodes: Dict[str, str] = field(default_factory=dict)
    """node name -> provider, for every node onnxruntime assigned, in graph order."""
    op_types: Dict[str, str] = field(default_factory=dict)
    """node name -> op type."""
    fallback: List[FallbackNode] = field(default_factory=list)
    subgraphs: int = 0
    """How many partitions onnxruntime made (a compiling provider fuses each into one kernel)."""
    transfers: List[ProviderShare] = field(default_factory=list)
    """Copies between providers (MemcpyToHost / MemcpyFromHost kernels), when profiled."""
    partitions: Dict[str, int] = field(default_factory=dict)
    """provider -> how many of the partitions it got (a compiling provider: one fused kernel each)."""
    asked: List[str] = field(default_factory=list)
    """Every provider the session was asked for, in priority order (onnxruntime's names)."""

    def accelerator_subgraphs(self) -> int:
        """Partitions of the providers other than CPU: what a compiling provider fuses into kernels.
        CPU's own count moves with any unfused node (an exposed Identity the plain session
        eliminated), so it says nothing of the provider's partition."""
        return sum(n for p, n in self.partitions.items() if p != CPU)

    @property
    def fell_back(self) -> bool:
        return bool(self.fallback)

    def summary(self) -> str:
        """One line: '12 nodes: 10 on OpenVINOExecutionProvider, 2 on CPUExecutionProvider'."""
        total = sum(p.nodes for p in self.providers)
        parts = []
        for p in self.providers:
            text = f"{p.nodes} on {p.provider}"
            if p.time_share is not None:
                text += f" ({p.time_share:.0%} of the time)"
            parts.append(text)
        return f"{total} nodes: " + ", ".join(parts)


@dataclass(frozen=True)
class PartitionChange:
    """How exposing tensors changed the partition of a session compared with the plain one."""

    plain: str
    instrumented: str
    moved: Dict[str, List[str]] = field(default_factory=dict)
    """node -> [provider in the plain session, provider in the instrumented one]."""
    subgraphs_plain: int = 0
    subgraphs_instrumented: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.moved) or self.subgraphs_plain != self.subgraphs_instrumented

    def line(self, keep: str = "outputs only (no --layers) or fewer tensors per run (--layers NAME...)") -> str:
        """One line: whether exposing tensors changed the partition, and `keep`: the read that keeps it."""
        if not self.changed:
            return f"{self.plain}: exposing tensors left the provider partition as in the plain session"
        return (f"{self.plain}: exposing tensors changed the provider partition ({len(self.moved)} node(s) moved "
                f"provider, {self.subgraphs_plain} -> {self.subgraphs_instrumented} accelerator partition(s)): what "
                f"was read with tensors exposed (rows marked 'moved') describes another partition than the deployed "
                f"one; {keep} keep the plain partition")


TRANSFER_OPS = ("MemcpyToHost", "MemcpyFromHost")


def build_placement(session: str, requested: str, subgraphs: Optional[List[tuple]],
                    kernels: Optional[List[tuple]] = None, order: Optional[List[str]] = None,
                    asked: Optional[List[str]] = None) -> Placement:
    """A `Placement` from onnxruntime's partitions and, when profiled, its kernels.

    `subgraphs`: [(provider, [(node, op type)])] (core/placement.read_assignment), or None: the
    kernels' providers are then the placement (`source` 'profile'). `kernels`: [(kernel name, op
    type, provider, time per run µs)] of a profiled run. `order`: node names in graph order, for
    the fallback list. Memcpy kernels are transfers, their own rows, never nodes of a provider.
    `asked`: every provider asked for (default: `requested` alone).
    """
    nodes: Dict[str, str] = {}
    ops: Dict[str, str] = {}
    count = 0
    partitions: Dict[str, int] = {}
    if subgraphs:
        for provider, members in subgraphs:
            count += 1
            partitions[provider] = partitions.get(provider, 0) + 1
            for name, op_type in members:
                nodes[name], ops[name] = provider, op_type
        source = "assignment"
    else:
        for name, op_type, provider, _ in kernels or []:
            if op_type not in TRANSFER_OPS:
                nodes[name], ops[name] = provider, op_type
        source = "profile"
    time: Dict[str, float] = {}
    transfers: Dict[str, List[float]] = {}
    for name, op_type, provider, us in kernels or []:
        if op_type in TRANSFER_OPS:
            row = transfers.setdefault(op_type, [0, 0.0])
            row[0] += 1
            row[1] += us
        else:
            time[provider] = time.get(provider, 0.0) + us
    total_time = sum(time.values()) + sum(r[1] for r in transfers.values())
    counts: Dict[str, int] = {}
    for provider in nodes.values():
        counts[provider] = counts.get(provider, 0) + 1
    providers = sorted(set(counts) | set(time), key=lambda p: (-counts.get(p, 0), p))
    total = max(len(nodes), 1)
    shares = [ProviderShare(p, counts.get(p, 0), counts.get(p, 0) / total,
                            time.get(p) if kernels is not None else None,
                            (time.get(p, 0.0) / total_time if total_time else 0.0) if kernels is not None else None)
              for p in providers]
    nodes, ops = _original_names(nodes, ops, set(order) if order else None)
    # without the graph (a header-only comparison), onnxruntime's own order of the partitions' nodes
    rank = {name: i for i, name in enumerate(order or list(nodes))}
    nodes = dict(sorted(nodes.items(), key=lambda item: (rank.get(item[0], len(rank)), item[0])))
    fallback = sorted((FallbackNode(n, ops[n], p) for n, p in nodes.items() if p != requested),
                      key=lambda f: (rank.get(f.node, len(rank)), f.node))
    moved = [ProviderShare(op, int(r[0]), 0.0, r[1], r[1] / total_time if total_time else 0.0)
             for op, r in sorted(transfers.items())]
    return Placement(session=session, requested=requested, source=source, providers=shares, nodes=nodes,
                     op_types={n: ops[n] for n in nodes}, fallback=fallback, subgraphs=count, transfers=moved,
                     partitions=partitions, asked=list(asked) if asked else [requested])


_TOKEN = re.compile(r"^(.+)_token_\d+$")


def _original_names(nodes: Dict[str, str], ops: Dict[str, str], original: Optional[set]
                    ) -> "tuple[Dict[str, str], Dict[str, str]]":
    """A layout-sensitive provider (QNN, NHWC) has its nodes rewritten before partitioning: onnxruntime
    names the rewritten node `<name>_token_<n>` (and adds the Transposes around it, kept under their
    own names). The rewritten node is the model's node: counted under its original name (one of the
    model's nodes when the graph is known, else a name no other assigned node has)."""
    if not any("_token_" in name for name in nodes):
        return nodes, ops
    renamed: Dict[str, str] = {}
    renamed_ops: Dict[str, str] = {}
    for name, provider in nodes.items():
        match = _TOKEN.match(name)
        known = original is None or (name not in original and match is not None and match.group(1) in original)
        own = match.group(1) if match and known else name
        if own != name and own in nodes:
            own = name  # the original name is assigned too: two nodes, keep both
        renamed[own], renamed_ops[own] = provider, ops[name]
    return renamed, renamed_ops


def partition_change(plain: Placement, instrumented: Placement) -> PartitionChange:
    """Nodes whose provider differs between a plain session and one with tensors exposed."""
    moved = {n: [p, instrumented.nodes.get(n, "?")] for n, p in plain.nodes.items()
             if instrumented.nodes.get(n, p) != p}
    return PartitionChange(plain=plain.session, instrumented=instrumented.session, moved=moved,
                           subgraphs_plain=plain.accelerator_subgraphs(),
                           subgraphs_instrumented=instrumented.accelerator_subgraphs())


FALLBACK_RULE = "MI871"
"""Error: nodes ran on another provider than `--require-provider`."""
NAMED_NODES = 10


def require_provider_findings(placement: Placement, required: Optional[str]) -> List[Any]:
    """MI871 when some node of `placement` ran elsewhere than on `required` (an onnxruntime name)."""
    from .base import Finding, Severity

    if not required:
        return []
    away = [(n, p) for n, p in placement.nodes.items() if p != required]
    if not away and placement.nodes:
        return []
    ops = placement.op_types
    named = ", ".join(f"{n} ({ops.get(n, '?')} on {p})" for n, p in away[:NAMED_NODES])
    more = f" and {len(away) - NAMED_NODES} more" if len(away) > NAMED_NODES else ""
    message = (f"{placement.session}: {len(away)} of {len(placement.nodes)} nodes did not run on {required}: "
               f"{named}{more}") if placement.nodes else f"{placement.session}: no node placement was recorded"
    return [Finding(rule=FALLBACK_RULE, severity=Severity.ERROR, message=message,
                    node=away[0][0] if away else None,
                    hint=f"these ops are not supported by {required} here (see docs/providers.md)",
                    data={"required": required, "nodes": {n: p for n, p in away}})]


IDLE_RULE = "MI872"
"""Warning: a provider asked for took no node of the session (the run was on the others)."""


def idle_provider_findings(placement: Placement) -> List[Any]:
    """MI872 for each provider other than CPU that `placement`'s session was asked for and that took
    no node: onnxruntime then ran everything elsewhere without a word (a plugin whose device or
    options leave it nothing, a provider that supports none of the ops), and every output agrees."""
    from .base import Finding, Severity

    if not placement.nodes:
        return []
    counts: Dict[str, int] = {}
    for provider in placement.nodes.values():
        counts[provider] = counts.get(provider, 0) + 1
    ran = ", ".join(f"{n} on {p}" for p, n in sorted(counts.items(), key=lambda item: (-item[1], item[0])))
    return [Finding(rule=IDLE_RULE, severity=Severity.WARNING,
                    message=f"{placement.session}: {provider} was asked for and took no node: all "
                            f"{len(placement.nodes)} nodes ran elsewhere ({ran})",
                    hint=f"{provider} supports none of these ops with this device and options, so the results are "
                         f"the other providers'; --require-provider {_alias(provider)} makes this an error (docs/providers.md)",
                    data={"provider": provider, "nodes": len(placement.nodes), "ran": counts})
            for provider in dict.fromkeys(placement.asked) if provider != CPU and provider not in counts]


def _alias(provider: str) -> str:
    """`QNNExecutionProvider` -> `qnn`, the name a user types."""
    name = provider.split(".", 1)[0]
    return (name[: -len("ExecutionProvider")] if name.endswith("ExecutionProvider") else name).lower()
