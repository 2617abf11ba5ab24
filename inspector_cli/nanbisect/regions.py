"""Regions of the graph, their frontiers, and where to put checkpoints.

A *region* is a set of top-level nodes (in topological order) computed from *feeds* (captured
tensors, known to be clean) towards *targets* (the tensors whose non-finite values we explain).
The *frontier* after the k-th node of a region is every tensor produced so far in the region that
a later node (or the end of the region) still reads: capturing it is enough to replay the rest of
the region, and it is clean exactly when nothing bad produced so far is still alive. A frontier of
one tensor is a cut every path passes through (a residual block boundary); checkpoints prefer them
because they are small and make the replayed span self-contained.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Set, Tuple

from ..core.expose import nodes_between
from ..core.graph import ModelGraph, NodeInfo

RANDOM_OPS = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}


class Topology:
    """Positions, producers and consumers of the top-level graph, by tensor name."""

    def __init__(self, graph: ModelGraph) -> None:
        self.graph = graph
        self.nodes = graph.nodes
        self.position: Dict[str, int] = {}
        for node in graph.nodes:
            for out in node.outputs:
                if out:
                    self.position[out] = node.order
        self.sources: Set[str] = set(graph.input_names) | set(graph.initializer_names)
        self.outputs: Tuple[str, ...] = tuple(graph.output_names)
        self.consumer_positions: Dict[str, List[int]] = {
            t: sorted({n.order for n in nodes}) for t, nodes in graph.consumers.items()}
        # Tensors computed from weights alone (Identity of a shared weight, Constant, folded shapes):
        # a replay recomputes them, so they never need capturing and do not make a frontier.
        self.constant: Set[str] = set()
        for node in graph.nodes:
            if node.op_type not in RANDOM_OPS and all(t in graph.initializer_names or t in self.constant
                                                      for t in node.all_inputs):
                self.constant.update(o for o in node.outputs if o)

    def is_computed(self, tensor: str) -> bool:
        return tensor in self.position

    def computed_inputs(self, position: int) -> List[str]:
        """Inputs of a node that other nodes compute (initializers and graph inputs excluded)."""
        return [t for t in self.nodes[position].all_inputs if t in self.position]

    def surely_reaches(self, tensor: str, targets: Set[str], last_position: int) -> bool:
        """True when a bad `tensor` makes one of `targets` bad whatever the values: a path of nodes
        (up to `last_position`) that each turn a bad input into a bad output (see PRESERVING)."""
        seen: Set[str] = {tensor}
        stack = [tensor]
        while stack:
            current = stack.pop()
            if current in targets:
                return True
            for pos in self.consumer_positions.get(current, ()):
                node = self.nodes[pos]
                if pos > last_position or not preserves(self.graph, node, current):
                    continue
                for out in node.outputs:
                    if out and out not in seen:
                        seen.add(out)
                        stack.append(out)
        return False


# op -> input indices through which a NaN/Inf anywhere always leaves a NaN/Inf in the output
# (None: every input). Ops that can drop or squash values (Relu(-Inf) = 0, Slice, Gather, MaxPool,
# Softmax, Where...) are absent: through them, only a replay can tell.
PRESERVING: Dict[str, Optional[Tuple[int, ...]]] = {
    "Identity": None, "Reshape": (0,), "Flatten": (0,), "Squeeze": (0,), "Unsqueeze": (0,), "Transpose": (0,),
    "Concat": None, "Neg": (0,), "Abs": (0,), "Add": None, "Sub": None, "Mul": None, "Div": (0,), "Sum": None,
    "Mean": None, "MatMul": None, "Gemm": None, "Expand": (0,), "Tile": (0,), "Pad": (0,), "Sqrt": (0,),
    "Log": (0,), "BatchNormalization": (0,), "InstanceNormalization": (0,), "LayerNormalization": (0,),
    "GlobalAveragePool": (0,), "ReduceSum": (0,), "ReduceMean": (0,), "Conv": None,
}
FLOAT_TYPES = {1, 10, 11, 16}


def preserves(graph: ModelGraph, node: NodeInfo, tensor: str) -> bool:
    """Does a bad value in `tensor`, an input of `node`, surely make one of its outputs bad?"""
    if node.op_type == "Cast":
        return node.inputs[:1] == (tensor,) and graph.node_attribute(node.name, "to") in FLOAT_TYPES
    if node.domain not in ("", "ai.onnx") or node.op_type not in PRESERVING:
        return False
    indices = PRESERVING[node.op_type]
    if indices is not None and not any(i < len(node.inputs) and node.inputs[i] == tensor for i in indices):
        return False
    if node.op_type == "Conv":  # every input element must be read: no stride skipping it, no dilation
        kernel = graph.node_attribute(node.name, "kernel_shape") or []
        strides = graph.node_attribute(node.name, "strides") or []
        dilations = graph.node_attribute(node.name, "dilations") or []
        if not kernel or any(d != 1 for d in dilations) or any(s > k for s, k in zip(strides, kernel)):
            return False
    return True


@dataclass(frozen=True)
class Region:
    """Nodes computed from clean `feeds` towards `targets`."""

    positions: Tuple[int, ...]
    feeds: Tuple[str, ...]
    targets: Tuple[str, ...]

    @property
    def key(self) -> Tuple[Tuple[str, ...], Tuple[str, ...]]:
        return self.feeds, self.targets

    @property
    def is_root(self) -> bool:
        return not self.feeds


@dataclass
class RegionLayout:
    """Produced tensors of a region with the local index where each is born and last read."""

    region: Region
    born: Dict[str, int] = field(default_factory=dict)
    last_use: Dict[str, int] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(self.region.positions)

    def frontier(self, cut: int) -> List[str]:
        """Tensors alive across the cut after local index `cut` (ordered by birth)."""
        return [t for t, b in self.born.items() if b <= cut < self.last_use[t]]


def make_region(topo: Topology, feeds: Sequence[str], targets: Sequence[str]) -> Region:
    """The nodes needed to compute `targets` from `feeds` (plus graph inputs and weights)."""
    names = set(nodes_between(topo.graph, feeds, targets))
    positions = tuple(n.order for n in topo.nodes if n.name in names)
    produced = {out for p in positions for out in topo.nodes[p].outputs if out}
    read = {t for p in positions for t in topo.nodes[p].all_inputs}
    used_feeds = tuple(sorted((t for t in feeds if t in read and t not in produced), key=lambda t: topo.position.get(t, -1)))
    return Region(positions, used_feeds, tuple(targets))


def root_region(topo: Topology) -> Region:
    return Region(tuple(range(len(topo.nodes))), (), topo.outputs)


def layout(topo: Topology, region: Region) -> RegionLayout:
    lay = RegionLayout(region)
    local = {pos: i for i, pos in enumerate(region.positions)}
    end = len(region.positions)
    targets = set(region.targets)
    for i, pos in enumerate(region.positions):
        for out in topo.nodes[pos].outputs:
            if out and out not in topo.constant:
                lay.born[out] = i
    for tensor, born in lay.born.items():
        uses = [local[p] for p in topo.consumer_positions.get(tensor, ()) if p in local]
        last = max(uses) if uses else born
        lay.last_use[tensor] = end if tensor in targets else max(last, born)
    return lay


NODES_PER_CHECKPOINT = 8


@dataclass(frozen=True)
class CheckpointPlan:
    """Where a region is cut for one layered-scan run."""

    cuts: Tuple[int, ...]
    """Local indices after which the frontier is captured (ascending)."""
    frontiers: Tuple[Tuple[str, ...], ...]
    exposed: Tuple[str, ...]
    """Union of the frontiers, in birth order: what the run exposes."""
    bytes: int


def plan_checkpoints(lay: RegionLayout, sizes: Dict[str, int], wanted: int, budget: int,
                     feed_bytes: int = 0, per_exposed: int = 2) -> CheckpointPlan:
    """Up to `wanted` cuts (and one per 8 nodes) spread evenly over the region, each at the smallest
    frontier near its ideal place (a single-tensor cut when there is one), as many as fit `budget`."""
    n = lay.size
    if n <= 1:
        return CheckpointPlan((), (), (), 0)
    costs = _frontier_costs(lay, sizes)
    # at most one checkpoint per NODES_PER_CHECKPOINT nodes: every exposed tensor costs a copy and
    # may stop onnxruntime fusing its producer, and a clean sample pays for them all
    count = max(1, min(wanted, n - 1, n // NODES_PER_CHECKPOINT))
    while True:
        cuts = _spread_cuts(costs, n, count)
        frontiers = tuple(tuple(lay.frontier(c)) for c in cuts)
        exposed = tuple(dict.fromkeys(t for f in frontiers for t in f))
        total = sum(sizes.get(t, 0) for t in exposed) * per_exposed + feed_bytes
        if total <= budget or count == 1:
            return CheckpointPlan(cuts, frontiers, exposed, total)
        count = max(1, count // 2)


def _frontier_costs(lay: RegionLayout, sizes: Dict[str, int]) -> List[Tuple[int, int]]:
    """(bytes, tensor count) of the frontier after each local index, by a sweep over births/deaths."""
    n = lay.size
    delta_bytes = [0] * (n + 1)
    delta_count = [0] * (n + 1)
    for t, born in lay.born.items():
        last = lay.last_use[t]
        if last > born:
            delta_bytes[born] += sizes.get(t, 0)
            delta_count[born] += 1
            delta_bytes[min(last, n)] -= sizes.get(t, 0)
            delta_count[min(last, n)] -= 1
    costs, b, c = [], 0, 0
    for i in range(n):
        b += delta_bytes[i]
        c += delta_count[i]
        costs.append((b, c))
    return costs


def _spread_cuts(costs: List[Tuple[int, int]], n: int, count: int) -> Tuple[int, ...]:
    """`count` cuts in (0, n-1): the cheapest frontier in each window around the even spacing."""
    chosen: List[int] = []
    window = max(1, n // (2 * (count + 1)))
    for j in range(count):
        ideal = round((j + 1) * n / (count + 1)) - 1
        lo = max(0, ideal - window, chosen[-1] + 1 if chosen else 0)
        hi = min(n - 2, ideal + window)
        if lo > hi:
            continue
        best = min(range(lo, hi + 1), key=lambda k: (costs[k][1] > 1, costs[k][0], abs(k - ideal)))
        chosen.append(best)
    return tuple(chosen)

