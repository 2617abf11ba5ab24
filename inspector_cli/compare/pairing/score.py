"""Scoring candidate chains when pairing two graphs: evidence, confidence and tie-breaks.

Confidence, for a candidate of the same op family:
- inputs are the partners of the reference chain's inputs: 0.85, +0.10 when the element counts
  agree, +0.05 when a name agrees too (1.0);
- inputs not known yet (upstream unpaired) but a tensor name agrees: 0.80 (0.65 for a node name
  only), +0.10 when the element counts agree;
- a fusion the candidate cannot explain (a dropped activation with no clamping quantisation or
  fused activation, an affine op dropped from a head that cannot absorb it): -0.20.
Equally good candidates (Q/K/V projections reading one tensor) are separated by names, op
attributes, small constant operands and weight correlation; if that fails the chain is reported
ambiguous rather than paired by position.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Set, Tuple

import numpy as np

from .semantic import ACTIVATIONS, AFFINE, HEADS_ABSORBING_AFFINE, Chain, SemanticGraph, family

MIN_CONFIDENCE = 0.7
TIE_MARGIN = 0.05
ATTRS = ("kernel_shape", "strides", "group", "dilations", "pads", "axis", "axes", "perm", "transA", "transB")


@dataclass
class Candidate:
    chain: Chain
    name_hits: Set[str] = field(default_factory=set)
    hit_names: List[str] = field(default_factory=list)
    inputs: str = "unknown"
    family_ok: bool = True
    shape: str = "unknown"
    penalty: float = 0.0
    notes: List[str] = field(default_factory=list)
    same_sig: bool = False
    """The candidate's end has the reference end's computation signature (signature.py)."""
    exact_sig: bool = False
    """... and every constant behind it was hashed whole: the two values are the same computation."""
    claimed_by: Optional[str] = None
    """A reference tensor (of another chain) named like this candidate's tensors."""
    confidence: float = 0.0
    located_by: str = "structure"
    evidence: str = ""
    tie: float = 0.0
    """Tie-break score among equally confident candidates (names, attributes, constants, signature)."""
    chosen: str = ""
    """How it was chosen among tied candidates, for the evidence."""


def numel(sem: SemanticGraph, tensor: str) -> Optional[int]:
    # memoised per graph: a candidate chain's end is sized once per reference chain that considers it
    cache = sem.__dict__.setdefault("_numel", {})
    if tensor in cache:
        return cache[tensor]
    count = cache[tensor] = sem.graph.tensor_info(tensor).element_count()
    return count


def aligned_prefix(chain: Chain, other: Chain) -> Tuple[int, int]:
    """Indices of the chain steps whose outputs pair as ends, after aligning equal ops from the end."""
    i, j = len(chain.nodes) - 1, len(other.nodes) - 1
    while i > 0 and j > 0 and family(chain.nodes[i].op_type) == family(other.nodes[j].op_type):
        i, j = i - 1, j - 1
    return i, j


def chain_signature_score(a: SemanticGraph, b: SemanticGraph, chain: Chain, cand: Candidate) -> None:
    """Fill the candidate's family, element-count and fusion evidence."""
    other = cand.chain
    cand.family_ok = chain.family == other.family
    na, nb = numel(a, chain.end), numel(b, other.end)
    cand.shape = "unknown" if na is None or nb is None else ("equal" if na == nb else "differ")
    i, j = aligned_prefix(chain, other)
    cand.penalty, cand.notes = _fusion_penalty(a, b, chain, i, other, j)


def _fusion_penalty(a: SemanticGraph, b: SemanticGraph, chain: Chain, i: int, other: Chain, j: int
                    ) -> Tuple[float, List[str]]:
    """Ops one side runs separately but the other folded away (steps 1..i of `chain`, 1..j of `other`),
    checked against what the folding side can absorb."""
    if i <= 0 and j <= 0:
        return 0.0, []  # nothing dropped on either side (most pairs)
    dropped_a = [family(n.op_type) for n in chain.nodes[1:i + 1]]
    dropped_b = [family(n.op_type) for n in other.nodes[1:j + 1]]
    penalty, notes = 0.0, []
    for ops, that, sem in ((dropped_a, other, b), (dropped_b, chain, a)):
        kept_acts = {family(n.op_type) for n in that.nodes}
        for op in ops:
            if op in AFFINE and that.family not in HEADS_ABSORBING_AFFINE:
                penalty += 0.2
                notes.append(f"{op} dropped by a {that.family}")
            elif op in ACTIVATIONS and op not in kept_acts and not _activation_explained(sem, that, op):
                penalty += 0.2
                notes.append(f"{op} missing on one side")
    return min(penalty, 0.4), notes


def _activation_explained(sem: SemanticGraph, chain: Chain, op: str) -> bool:
    """A Relu/Clip absorbed by the other side: a fused activation attribute, or a quantisation
    whose zero point sits at the bottom of its range (negative values clamp to zero)."""
    head = chain.nodes[-1]
    act = sem.graph.node_attribute(head.name, "activation")
    if isinstance(act, bytes):
        act = act.decode()
    if act and str(act).lower() == op.lower():
        return True
    if op not in ("Relu", "Clip"):
        return False
    view = sem.view(chain.end)
    if view.quant is None or view.quant.zero_point is None:
        return False
    zero = sem.array(view.quant.zero_point)
    if zero is None:
        return False
    lowest = np.iinfo(zero.dtype).min if np.issubdtype(zero.dtype, np.integer) else None
    return lowest is not None and bool(np.all(zero == lowest))


def _confidence(cand: Candidate) -> None:
    named = bool(cand.name_hits & {"end", "step"})
    if cand.inputs == "match":
        cand.confidence = 0.85 + (0.1 if cand.shape == "equal" else 0.0) + (0.05 if named else 0.0)
        cand.located_by = "name" if named else "structure"
    else:
        cand.confidence = (0.8 if named else 0.65) + (0.1 if cand.shape == "equal" else 0.0)
        cand.located_by = "name"
    cand.confidence = max(0.0, min(1.0, cand.confidence - cand.penalty))
    if cand.same_sig:  # the same ops, attributes and constants from the same inputs
        cand.confidence = max(cand.confidence, 0.95)
    parts = []
    if cand.same_sig:
        parts.append("same computation")
    if named:
        parts.append(f"name '{cand.hit_names[0]}'" if cand.hit_names else "same name")
    elif "node" in cand.name_hits:
        parts.append("same node name")
    if cand.inputs == "match":
        parts.append("inputs paired")
    parts.append({"equal": "same size", "unknown": "size unknown"}.get(cand.shape, ""))
    parts.extend(cand.notes)
    cand.evidence = ", ".join(p for p in parts if p)


def _rejection(chain: Chain, cand: Candidate) -> Optional[str]:
    other = cand.chain
    if not cand.family_ok:
        return f"'{other.end}' in the other model is computed by {other.head.op_type}, not {chain.head.op_type}"
    if cand.inputs == "mismatch":
        return f"'{other.end}' in the other model reads different inputs"
    if cand.claimed_by:
        return f"'{other.end}' in the other model is named like the reference's '{cand.claimed_by}'"
    if cand.shape == "differ":
        return f"'{other.end}' in the other model has a different number of elements"
    if cand.inputs != "match" and not cand.name_hits:
        return "no candidate with paired inputs"
    return None


def best_candidates(a: SemanticGraph, b: SemanticGraph, chain: Chain, cands: Sequence[Candidate],
                    inputs_paired: bool = True) -> Tuple[Optional[Candidate], str]:
    """The accepted candidate, or None with the reason the chain stays unpaired."""
    viable, rejected = [], []
    for cand in cands:
        why = _rejection(chain, cand)
        if why is None:
            _confidence(cand)
            viable.append(cand)
        elif cand.name_hits:
            rejected.append(why)
    if not viable:
        if rejected:
            return None, "same name, but " + rejected[0]
        if not inputs_paired:
            return None, "its inputs have no counterpart (the graphs differ upstream)"
        return None, "no node of the same kind reads the counterparts of its inputs"
    viable.sort(key=lambda c: -c.confidence)
    top = [c for c in viable if c.confidence >= viable[0].confidence - TIE_MARGIN]
    if len(top) > 1:
        for cand in top:
            cand.tie = _tie_score(a, b, chain, cand)
            cand.notes.append(f"tie-break {cand.tie:.2f}")
        top.sort(key=lambda c: -c.tie)
        tied = [c for c in top if c.tie > top[0].tie - 0.5]
        if len(tied) > 1 and all(c.exact_sig for c in tied):
            # identical computations (a mask the exporter builds once per layer): equal values, so the
            # first in the candidate's order is as right as any
            tied.sort(key=lambda c: c.chain.index)
            top = tied
            top[0].chosen = f"first of {len(tied)} identical computations"
        elif top[0].tie - top[1].tie < 0.5:
            names = ", ".join(f"'{c.chain.end}'" for c in top[:4])
            return None, f"ambiguous: {len(top)} equally likely counterparts ({names}); pair it with --map"
        _confidence(top[0])
        top[0].evidence += "; " + (top[0].chosen or f"chosen among {len(top)} by names/attributes/constants")
    best = top[0]
    if best.confidence < MIN_CONFIDENCE:
        return None, f"best counterpart '{best.chain.end}' is only {best.confidence:.2f} likely ({best.evidence})"
    return best, ""


def _tie_score(a: SemanticGraph, b: SemanticGraph, chain: Chain, cand: Candidate) -> float:
    other = cand.chain
    score = 3.0 * ("end" in cand.name_hits) + 2.0 * ("step" in cand.name_hits) + 1.0 * ("node" in cand.name_hits)
    score += 4.0 * cand.same_sig
    for attr in ATTRS:
        x = a.graph.node_attribute(chain.head.name, attr)
        y = b.graph.node_attribute(other.head.name, attr)
        if x is not None and y is not None:
            score += 0.5 if _same(x, y) else -0.5
    score += _constant_score(a, b, chain, other)
    return score


def _same(x: object, y: object) -> bool:
    try:
        return bool(np.array_equal(np.asarray(x), np.asarray(y)))
    except Exception:  # attribute values of unrelated kinds
        return False


def _constants(sem: SemanticGraph, chain: Chain) -> List[np.ndarray]:
    values = []
    for tensor in chain.head.inputs:
        root = sem.canonical(tensor) if tensor else ""
        if not root or root not in sem.static:
            continue
        # a constant read through a DequantizeLinear (of any domain) is compared by the value it stands
        # for: its stored integers are numbers of another scale (read raw, they paired a float bias
        # with the wrong one)
        value = _dequantized_constant(sem, tensor)
        if value is None:
            value = sem.array(root)
        if value is not None:
            values.append(np.asarray(value))
    return values


def _dequantized_constant(sem: SemanticGraph, tensor: str) -> Optional[np.ndarray]:
    producer = sem.graph.producer.get(tensor)
    if producer is None or producer.op_type != "DequantizeLinear":
        return None
    raw = sem.array(producer.inputs[0])
    spec = sem.quant_of.get(producer.inputs[0])
    if raw is None or spec is None:
        return None
    try:
        return sem.dequantize(raw, spec)
    except ValueError:
        return None


def _constant_score(a: SemanticGraph, b: SemanticGraph, chain: Chain, other: Chain) -> float:
    """+2 per small constant operand equal in both, -2 per different one; weights by correlation."""
    score = 0.0
    for x, y in zip(_constants(a, chain), _constants(b, other)):
        if x.size <= 64 and y.size <= 64:
            score += 2.0 if x.shape == y.shape and np.allclose(x.astype(np.float64), y.astype(np.float64)) else -2.0
        elif x.size == y.size:
            fx, fy = x.astype(np.float64).ravel(), y.astype(np.float64).ravel()
            if x.ndim == 2 and x.shape != y.shape and x.shape == y.shape[::-1]:
                fy = y.astype(np.float64).T.ravel()
            if fx.std() > 0 and fy.std() > 0:
                score += 2.0 * float(np.corrcoef(fx, fy)[0, 1])
    return score
