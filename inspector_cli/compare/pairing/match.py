"""Pairing the tensors of two different graphs of one network, each pair with a method and a confidence.

Layers, in order:
1. the user's map (`--map a=b`, YAML `map:`): taken as given;
2. chains (see semantic.py) are visited in the reference's topological order and located in the
   candidate graph by **name** (the chain's tensor or node names, aliases included) and by
   **structure** (a chain of the same op family whose inputs are the partners of this chain's
   inputs, with the same number of elements; attributes, small constants and weights break ties);
3. inside two located chains, tensors pair from the chain ends backwards while op types agree;
   where one side fused ops the other runs separately (Conv+BatchNormalization+Relu vs one
   Conv whose quantisation clamps at zero), the ends pair as **fused** and the unfused interior
   stays unpaired with that reason.

A pair's method says what had to be looked through: `map`, `fused`, `qdq` (the candidate's value
is a Q->DQ re-materialisation or a QOperator output, read dequantised), `cast` / `identity`,
`name` (same name, nothing in between) or `structural` (different names, same graph position).
Nothing is paired by position alone: candidates that stay ambiguous are reported unpaired.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Set, Tuple

from ...core.graph import ModelGraph
from ...errors import UsageError
from .lookthrough import PADDED_FAMILIES, padded_source
from .score import MIN_CONFIDENCE, Candidate, best_candidates, chain_signature_score
from .semantic import COMMUTATIVE, Chain, SemanticGraph, TensorView, family
from .signature import Signatures

__all__ = ["MIN_CONFIDENCE", "TensorPair", "Unpaired", "TensorMatching", "match_tensors", "parse_tensor_map"]
METHODS = ("map", "name", "qdq", "cast", "identity", "fused", "structural")


_QUANTIZED = "quantized"

@dataclass(frozen=True)
class TensorPair:
    """A tensor of the reference (A) and the candidate (B) holding the same quantity."""

    a: str
    b: str
    view_a: TensorView
    view_b: TensorView
    method: str
    confidence: float
    located_by: str
    """'map', 'name' or 'structure': how B's chain was found."""
    evidence: str
    op_a: str
    op_b: str
    chain_end: bool = True
    """False for a tensor inside a fused chain of A (compared only with --granularity tensor)."""


@dataclass(frozen=True)
class Unpaired:
    tensor: str
    op: str
    reason: str


@dataclass
class TensorMatching:
    pairs: List[TensorPair]
    unpaired_a: List[Unpaired]
    unpaired_b: List[Unpaired]
    notes: List[str] = field(default_factory=list)

    def counts(self) -> Dict[str, int]:
        found = Counter(p.method for p in self.pairs)
        return {m: found[m] for m in METHODS if found[m]}


class _Matcher:
    def __init__(self, a: SemanticGraph, b: SemanticGraph, sig_a: Optional[Signatures] = None,
                 sig_b: Optional[Signatures] = None) -> None:
        self.a, self.b = a, b
        self.sig_a, self.sig_b = sig_a, sig_b
        # B's chains by the signature of their end: where a chain reads no data input (a mask built from
        # shapes and booleans, an If on a flag) this is the only structural way to find its counterpart.
        self.b_by_sig: Dict[int, List[Chain]] = {}
        if sig_a is not None and sig_b is not None:
            for chain in b.chains:
                token = sig_b.of.get(chain.end)
                if token is not None:
                    self.b_by_sig.setdefault(token, []).append(chain)
        self.partner: Dict[str, str] = {}
        self.used_b: Set[str] = set()
        self.pairs: Dict[str, TensorPair] = {}
        self.reasons: Dict[str, str] = {}
        self.fused_b: Dict[str, str] = {}
        self.done_chains_b: Set[int] = set()
        self.b_by_input: Dict[str, List[Chain]] = {}
        self.b_unpadded: Dict[str, str] = {}
        for chain in b.chains:
            for tensor in chain.inputs:
                self.b_by_input.setdefault(tensor, []).append(chain)
                source = padded_source(b, tensor) if chain.family in PADDED_FAMILIES else None
                if source is not None:  # B pads separately what A's Conv pads itself
                    self.b_unpadded[tensor] = source
                    self.b_by_input.setdefault(source, []).append(chain)
        self.b_name_to_canon = dict(b.canon)
        # onnxruntime's QOperator quantizer names an integer output after the float tensor it replaces
        # ('<name>_quantized', '<name>quantized' for Split outputs): that is its name for pairing too.
        # Only for a chain's last tensor: a reference chain's inner step (Gemm of Gemm+Sigmoid) must not
        # take the candidate's shorter chain by such a name (its end is another tensor).
        self.b_quantized_name: Dict[str, str] = {}
        for name, canon in b.canon.items():
            if name.endswith(_QUANTIZED) and canon in b.quant_of:
                base = name[:-len(_QUANTIZED)]
                base = base[:-1] if base.endswith("_") else base
                if base not in self.b_name_to_canon:
                    self.b_quantized_name[base] = canon

    # ---- anchors ------------------------------------------------------------------------------------
    def anchor(self, a: str, b: str) -> None:
        self.partner[a] = b
        self.used_b.add(b)

    def user_pair(self, a_name: str, b_name: str) -> None:
        ca, cb = self.a.canonical(a_name), self.b.canonical(b_name)
        self.anchor(ca, cb)
        chain_a, chain_b = self.a.chain_of.get(ca), self.b.chain_of.get(cb)
        self.pairs[ca] = TensorPair(
            a=ca, b=cb, view_a=self.a.exact_view(a_name), view_b=self.b.exact_view(b_name), method="map",
            confidence=1.0, located_by="map", evidence=f"--map {a_name}={b_name}",
            op_a=chain_a.ops(self.a.step_of.get(ca)) if chain_a else "?",
            op_b=chain_b.ops(self.b.step_of.get(cb)) if chain_b else "?",
            chain_end=chain_a is None or chain_a.end == ca)
        if chain_b is not None:
            self.done_chains_b.add(chain_b.index)

    # ---- candidates ---------------------------------------------------------------------------------
    def candidates(self, chain: Chain) -> Dict[int, Candidate]:
        found: Dict[int, Candidate] = {}
        b_chain_of = self.b.chain_of
        b_canon = self.b_name_to_canon
        aliases_a = self.a.aliases

        def get(c: Chain) -> Candidate:
            cand = found.get(c.index)
            if cand is None:
                cand = found[c.index] = Candidate(c)
            return cand

        last_step = len(chain.tensors) - 1
        for step, tensor in enumerate(chain.tensors):
            last = step == last_step
            more = aliases_a.get(tensor)
            for name in (tensor, *more) if more else (tensor,):  # names_of(tensor)
                cb = b_canon.get(name) or (self.b_quantized_name.get(name) if last else None)
                target = b_chain_of.get(cb) if cb else None
                if target is not None:
                    cand = get(target)
                    cand.name_hits.add("end" if last else "step")
                    cand.hit_names.append(name)
        b_nodes = self.b.graph.node_by_name
        for node in chain.nodes:
            other = b_nodes.get(node.name)
            if other is not None and node.original_name:
                target = b_chain_of.get(self.b.canonical(other.outputs[0])) if other.outputs else None
                if target is not None:
                    get(target).name_hits.add("node")
        partners = [self.partner_of(chain, t) for t in chain.inputs]
        if chain.inputs and all(partners):
            for target in self.b_by_input.get(partners[0], ()):  # type: ignore[arg-type]
                get(target)
        token = self.sig_a.of.get(chain.end) if self.sig_a is not None else None
        for target in self.b_by_sig.get(token, ()) if token is not None else ():
            cand = get(target)
            cand.same_sig = True
            cand.exact_sig = token not in self.sig_a.inexact and token not in self.sig_b.inexact  # type: ignore[union-attr]
        for cand in found.values():
            # equal signatures: the same computation on the same inputs, so the inputs correspond too
            cand.inputs = "match" if cand.same_sig else self.compare_inputs(chain, cand.chain, partners)
            if not cand.name_hits:
                cand.claimed_by = self.claimed_by_name(chain, cand.chain)
        return found

    def claimed_by_name(self, chain: Chain, other: Chain) -> Optional[str]:
        """A reference tensor of another chain that carries the name of one of `other`'s tensors: the
        name says `other` belongs there, so structure alone must not take it."""
        for tensor in other.tensors:
            for name in self.b.names_of(tensor):
                ca = self.a.canon.get(name)
                owner = self.a.chain_of.get(ca) if ca else None
                if owner is not None and owner.index != chain.index:
                    return name
        return None

    def partner_of(self, chain: Chain, tensor: str) -> Optional[str]:
        """The partner of one of `chain`'s inputs; for a Conv reading a zero Pad the other model folded
        into its Conv (lookthrough.py), the partner of the Pad's input."""
        found = self.partner.get(tensor)
        if found is None and chain.family in PADDED_FAMILIES:
            source = padded_source(self.a, tensor)
            found = self.partner.get(source) if source is not None else None
            if found is not None:
                self.reasons[tensor] = "a Pad the other model folds into its Conv's padding"
        return found

    def compare_inputs(self, chain: Chain, other: Chain, partners: Sequence[Optional[str]]) -> str:
        found = self._compare_inputs(chain, other.inputs, partners)
        if found != "match" and any(t in self.b_unpadded for t in other.inputs):
            unpadded = tuple(self.b_unpadded.get(t, t) for t in other.inputs)
            if self._compare_inputs(chain, unpadded, partners) == "match":
                return "match"
        return found

    def _compare_inputs(self, chain: Chain, other_inputs: Sequence[str], partners: Sequence[Optional[str]]) -> str:
        if len(chain.inputs) != len(other_inputs):
            return "mismatch" if all(partners) else "unknown"
        known = [(p, q) for p, q in zip(partners, other_inputs) if p is not None]
        if chain.family in COMMUTATIVE:
            if all(partners):
                return "match" if sorted(partners) == sorted(other_inputs) else "mismatch"  # type: ignore[type-var]
            return "unknown" if all(p in other_inputs for p, _ in known) else "mismatch"
        if all(p == q for p, q in known):
            return "match" if len(known) == len(partners) else "unknown"
        return "mismatch"

    # ---- the pass -----------------------------------------------------------------------------------
    def run(self) -> None:
        for chain in self.a.chains:
            if any(t in self.pairs for t in chain.tensors):
                continue
            cands = [c for c in self.candidates(chain).values() if c.chain.index not in self.done_chains_b]
            for cand in cands:
                chain_signature_score(self.a, self.b, chain, cand)
            paired = all(t in self.partner for t in chain.inputs)
            accepted, reason = best_candidates(self.a, self.b, chain, cands, paired)
            if accepted is None:
                for tensor in chain.tensors:
                    self.reasons.setdefault(tensor, reason)
                continue
            self.align(chain, accepted)

    def align(self, chain: Chain, cand: Candidate) -> None:
        other = cand.chain
        self.done_chains_b.add(other.index)
        i, j = len(chain.nodes) - 1, len(other.nodes) - 1
        steps: List[Tuple[int, int, bool]] = []
        while i > 0 and j > 0 and family(chain.nodes[i].op_type) == family(other.nodes[j].op_type):
            steps.append((i, j, False))
            i, j = i - 1, j - 1
        fused = i > 0 or j > 0
        steps.append((i, j, fused))
        for k in range(i):
            self.reasons[chain.tensors[k]] = f"fused into '{chain.tensors[i]}' ({chain.ops(i)}) to match " \
                                             f"{other.ops(j)} in the other model"
        for k in range(j):
            self.fused_b[other.tensors[k]] = f"fused: {other.ops(j)} matches {chain.ops(i)} of the reference"
        for si, sj, is_fused in steps:
            self.add_pair(chain, si, other, sj, cand, is_fused)
        for ea, eb in zip(chain.extra_outputs, other.extra_outputs):
            self.add_pair_tensors(ea, eb, chain, other, cand, False, chain.ops(), other.ops(), True)

    def add_pair(self, chain: Chain, i: int, other: Chain, j: int, cand: Candidate, fused: bool) -> None:
        end = i == len(chain.nodes) - 1
        whole = fused or end  # a chain's last tensor stands for the whole chain
        self.add_pair_tensors(chain.tensors[i], other.tensors[j], chain, other, cand, fused,
                              chain.ops(i) if whole else chain.nodes[i].op_type,
                              other.ops(j) if whole else other.nodes[j].op_type, end)

    def add_pair_tensors(self, ta: str, tb: str, chain: Chain, other: Chain, cand: Candidate, fused: bool,
                         op_a: str, op_b: str, end: bool) -> None:
        if tb in self.used_b and self.partner.get(ta) != tb:
            self.reasons[ta] = f"its counterpart '{tb}' is already paired"
            return
        self.anchor(ta, tb)
        view_a, view_b = self.a.view(ta), self.b.view(tb)
        kinds = set(self.b.kinds.get(view_b.expose, ())) | set(self.a.kinds.get(view_a.expose, ()))
        for name in cand.hit_names:
            if self.b.canonical(name) == tb:
                kinds |= set(self.b.kinds.get(name, ()))
        if fused:
            method = "fused"
        elif view_a.quant or view_b.quant or "qdq" in kinds:
            method = "qdq"
        elif "cast" in kinds:
            method = "cast"
        elif "identity" in kinds:
            method = "identity"
        else:
            method = "name" if cand.located_by == "name" and (ta == tb or ta in self.b.names_of(tb)) else "structural"
        self.pairs[ta] = TensorPair(a=ta, b=tb, view_a=view_a, view_b=view_b, method=method,
                                    confidence=round(cand.confidence, 3), located_by=cand.located_by,
                                    evidence=cand.evidence, op_a=op_a, op_b=op_b, chain_end=end)


def parse_tensor_map(entries: Sequence[Tuple[str, str]], a: ModelGraph, b: ModelGraph) -> List[Tuple[str, str]]:
    """The user's map entries that name intermediate tensors (outputs and inputs are paired elsewhere)."""
    known_a = set(a.producer) | set(a.input_names)
    known_b = set(b.producer) | set(b.input_names)
    pairs = []
    for x, y in entries:
        if x in a.output_names or x in a.input_names:
            continue
        if x not in known_a:
            raise UsageError(f"--map {x}={y}: the first model has no tensor '{x}'",
                             hint="name a tensor of MODEL_A ('mi probe MODEL --list' shows them)")
        if y not in known_b:
            raise UsageError(f"--map {x}={y}: the second model has no tensor '{y}'",
                             hint="name a tensor of MODEL_B")
        pairs.append((x, y))
    return pairs


def graph_position(graph: ModelGraph, tensor: str) -> Tuple[int, int]:
    """Where `tensor` is made in `graph`: its producer's topological position, then which output of
    that node it is (graph inputs and weights first). Rows and the first divergence follow it, so a
    second output of a multi-output node (Split, LayerNormalization's mean, an attention node's
    `present`) sits where its node runs, not before the graph's first layer."""
    node = graph.producer.get(tensor)
    if node is None:
        return (-1, 0)
    return (node.order, node.outputs.index(tensor))


def match_tensors(a: SemanticGraph, b: SemanticGraph, *, inputs: Sequence[Tuple[str, str]] = (),
                  user_map: Sequence[Tuple[str, str]] = (), selected: Optional[Set[str]] = None) -> TensorMatching:
    """Pair A's data tensors with B's (see the module doc); `selected` limits which of A's canonical
    tensors are reported (all are still matched, so that structure propagates)."""
    tokens_a = {x: x for x, _ in inputs}
    tokens_b = {y: x for x, y in inputs}
    matcher = _Matcher(a, b, Signatures(a.graph, tokens_a), Signatures(b.graph, tokens_b))
    for x, y in inputs:
        matcher.anchor(a.canonical(x), b.canonical(y))
        quantised = b.view(b.canonical(y))
        if quantised.quant is not None and (selected is None or x in selected):
            # The candidate quantises its input: that rounding is its first error, worth a row.
            matcher.pairs[x] = TensorPair(a=x, b=y, view_a=TensorView(x, x), view_b=quantised, method="qdq",
                                          confidence=1.0, located_by="name", evidence="model input, quantised by the candidate",
                                          op_a="input", op_b="QuantizeLinear")
    for x, y in user_map:
        matcher.user_pair(x, y)
    matcher.run()
    pairs = sorted((p for t, p in matcher.pairs.items() if selected is None or t in selected),
                   key=lambda p: graph_position(a.graph, p.a))
    unpaired_a = []
    for chain in a.chains:
        for step, tensor in enumerate(chain.tensors):
            if tensor in matcher.pairs or (selected is not None and tensor not in selected):
                continue
            reason = matcher.reasons.get(tensor, "no counterpart found")
            unpaired_a.append(Unpaired(tensor, chain.nodes[step].op_type, reason))
    paired_b = {p.b for p in matcher.pairs.values()}
    unpaired_b = []
    for chain in b.chains:
        for step, tensor in enumerate(chain.tensors):
            if tensor in paired_b:
                continue
            reason = matcher.fused_b.get(tensor, "no counterpart in the reference")
            unpaired_b.append(Unpaired(tensor, chain.nodes[step].op_type, reason))
    return TensorMatching(pairs, unpaired_a, unpaired_b)
