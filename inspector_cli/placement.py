"""Placement for the sessions of compare, probe and nan-bisect (docs/providers.md): which provider
ran each node, read from onnxruntime's graph-assignment record (free: kept while the session was
built, no profiler, no extra run), `--require-provider` findings, and capture honesty: the
partition of a session with tensors exposed against the plain one, and the layer rows it moves.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Dict, List, Optional, Sequence, Set

from .core.placement import Subgraph
from .core.plugin_eps import matches
from .core.providers import asked_names
from .core.runner import RuntimeConfig, cpu_only, open_session, provider_name
from .results.base import Finding
from .results.placement import (
    CPU,
    PartitionChange,
    Placement,
    build_placement,
    idle_provider_findings,
    partition_change,
    require_provider_findings,
)


def requested_provider(runtime: RuntimeConfig) -> str:
    """onnxruntime's name of the first provider `runtime` asks for (a policy's: the one it chose)."""
    names = asked_names(runtime)
    return names[0] if names else CPU


def graph_order(graph: Any) -> Optional[List[str]]:
    """Node names in graph order, for a loaded graph (a header-only `FileModel` has none)."""
    nodes = getattr(graph, "nodes", None)
    return [n.name for n in nodes] if nodes else None


def session_placement(label: str, runtime: RuntimeConfig, assignment: Optional[List[Subgraph]],
                      graph: Any = None) -> Optional[Placement]:
    """The `Placement` of one session from its partitions (None when onnxruntime recorded none)."""
    if not assignment:
        return None
    asked = asked_names(runtime)
    return build_placement(label, asked[0] if asked else CPU, assignment, order=graph_order(graph), asked=asked)


def placement_findings(placements: Sequence[Optional[Placement]], required: Optional[str]) -> List[Finding]:
    """MI872 (warning) for each provider a session was asked for that took no node, then MI871 for
    each session asked first for `required` whose nodes ran elsewhere; when no session was asked for
    it (e.g. `--require-provider openvino` on a CPU-only run), every session is checked, so the flag
    never passes on a run that did not use the provider at all."""
    found = [p for p in placements if p is not None]
    idle = [f for p in found for f in idle_provider_findings(p)]
    if not required:
        return idle
    # a plugin's alias (`ggml`) names the provider the sessions were asked for by that alias
    name = next((a for p in found for a in p.asked if matches(required, a)), provider_name(required))
    if not name:
        return idle
    if not found:
        return require_provider_findings(Placement("the run", name, "assignment", []), name)
    checked = [p for p in found if p.requested == name] or found
    return idle + [f for p in checked for f in require_provider_findings(p, name)]


def partition_changes(plain: Optional[Placement], instrumented: Sequence[Optional[List[Subgraph]]],
                      runtime: RuntimeConfig, label: str) -> Optional[PartitionChange]:
    """The partition change between the plain session and the capture sessions of one model (all
    chunks merged: a node moved in any chunk counts); None when either side was not read."""
    if plain is None or not instrumented or any(a is None for a in instrumented):
        return None
    changes = [partition_change(plain, build_placement(f"{label} with tensors exposed", requested_provider(runtime),
                                                       assignment, asked=asked_names(runtime)))
               for assignment in instrumented]
    moved: Dict[str, List[str]] = {}
    for change in changes:
        moved.update(change.moved)
    split = [c.subgraphs_instrumented for c in changes if c.subgraphs_instrumented != c.subgraphs_plain]
    return PartitionChange(plain=plain.session, instrumented=changes[0].instrumented, moved=moved,
                           subgraphs_plain=changes[0].subgraphs_plain,
                           subgraphs_instrumented=split[0] if split else changes[0].subgraphs_plain)


def moved_tensors(change: Optional[PartitionChange], graph: Any) -> Set[str]:
    """Tensors of `graph` produced by a node whose provider moved in `change`."""
    if change is None or not change.moved:
        return set()
    return {out for node in getattr(graph, "nodes", []) if node.name in change.moved for out in node.outputs if out}


def mark_moved_rows(layers: Any, moved: Dict[str, Set[str]]) -> Any:
    """The layer section with each row's `moved` set: the models ('A', 'B') whose node producing the
    row's tensor ran on another provider when tensors were exposed than in the plain session."""
    if layers is None or not any(moved.values()):
        return layers
    rows = []
    for row in layers.layers:
        which = [m for m, name in (("A", row.name), ("B", row.name_b)) if name in moved.get(m, set())]
        rows.append(replace(row, moved=which) if which else row)
    return replace(layers, layers=rows)


@dataclass(frozen=True)
class ExposedPlacement:
    """Placement of one model whose tensors were read by exposing them (probe, nan-bisect)."""

    placement: Optional[Placement]
    change: Optional[PartitionChange]
    moved: Set[str]
    """Tensors whose producing node moved provider when exposed."""


PLAIN_CHECK_SHARE = 0.03
"""The plain session for the partition check is built unasked when one build is at most this share of
the run (the issue's budget for the placement read); `--require-provider` builds it whatever it costs."""


def plain_check_wanted(required: Optional[str], build_seconds: float, run_seconds: float) -> bool:
    """Whether probe or nan-bisect builds the plain session: asked (`--require-provider`), or cheap
    beside the run (a capture session's build, which a plain one costs about as much as, within
    PLAIN_CHECK_SHARE of the run's time)."""
    return bool(required) or (run_seconds > 0 and build_seconds <= PLAIN_CHECK_SHARE * run_seconds)


def unchecked_note(runtime: RuntimeConfig, build_seconds: float, run_seconds: float) -> List[str]:
    """The line saying the placement is the capture session's, when the plain one was not built."""
    if cpu_only(runtime):
        return []
    share = f", {build_seconds / run_seconds:.0%} of this run" if run_seconds > 0 else ""
    return [f"placement read from a session with tensors exposed: comparing it with the plain session's "
            f"takes one more session build (~{build_seconds:.1f} s{share}; done unasked under "
            f"{PLAIN_CHECK_SHARE:.0%}); --require-provider NAME builds it"]


def exposed_placement(graph: Any, runtime: RuntimeConfig, captured: Sequence[Optional[List[Subgraph]]],
                      label: str = "model", check_plain: bool = False) -> ExposedPlacement:
    """The placement of `graph` and, with `check_plain`, how exposing tensors changed it.

    Without `check_plain`, or CPU only (nothing can move), the first capture session's partition is
    the placement: free. With it (`--require-provider`: the deployed placement is the question) and a
    provider other than CPU, one plain session is built for its partition and compared with every
    capture session's: one session build, 0.65-1.4 s under OpenVINO on the zoo (docs/providers.md),
    too much to pay on every run."""
    captured = [a for a in captured if a is not None]
    if cpu_only(runtime) or not check_plain:
        # named for what it is: a capture session's partition may differ from the deployed one
        named = label if cpu_only(runtime) else f"{label} (tensors exposed)"
        placement = session_placement(named, runtime, captured[0] if captured else None, graph)
        return ExposedPlacement(placement, None, set())
    plain_session = open_session(graph, runtime, label=f"{label} (plain, for its placement)")
    plain = session_placement(label, runtime, plain_session.assignment(), graph)
    del plain_session
    change = partition_changes(plain, captured, runtime, label) if captured else None
    return ExposedPlacement(plain, change, moved_tensors(change, graph))
