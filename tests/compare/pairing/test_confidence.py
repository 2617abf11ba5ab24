"""A candidate's confidence, how it was located and the evidence shown for it (compare/pairing/score.py
`_confidence`; scripts/mutation.sh pairing found every branch of it untested: the tests read only
whether a pair was made). Values are the rules of the module doc, computed by hand:

- inputs paired: 0.85, +0.10 same element count, +0.05 a tensor name agrees;
- inputs not known: 0.80 with a tensor name (0.65 without), +0.10 same element count;
- minus the fusion penalty, clipped to [0, 1]; at least 0.95 for the same computation signature.
"""
from __future__ import annotations

from typing import List, Optional, Set

import pytest
from onnx import helper

from inspector_cli.compare.pairing.score import Candidate, _confidence
from inspector_cli.compare.pairing.semantic import Chain, SemanticGraph
from inspector_cli.core.graph import ModelGraph

from ...fixtures.helpers import make_model, vi


def relu_chain() -> Chain:
    """The one chain of x -> Relu -> r (a real chain: what a Candidate holds)."""
    model = make_model([helper.make_node("Relu", ["x"], ["r"], name="relu")], [vi("x", [4])], [vi("r", [4])])
    return SemanticGraph.build(ModelGraph.from_proto(model)).chains[0]


def scored(inputs: str, shape: str, name_hits: Set[str] = frozenset(), hit_names: Optional[List[str]] = None,
           penalty: float = 0.0, notes: Optional[List[str]] = None, same_sig: bool = False) -> Candidate:
    cand = Candidate(relu_chain(), name_hits=set(name_hits), hit_names=list(hit_names or []), inputs=inputs,
                     shape=shape, penalty=penalty, notes=list(notes or []), same_sig=same_sig)
    _confidence(cand)
    return cand


@pytest.mark.parametrize("inputs, shape, hits, names, confidence, located_by, evidence", [
    # inputs paired
    ("match", "equal", set(), [], 0.95, "structure", "inputs paired, same size"),
    ("match", "unknown", set(), [], 0.85, "structure", "inputs paired, size unknown"),
    ("match", "equal", {"end"}, ["t"], 1.0, "name", "name 't', inputs paired, same size"),
    ("match", "unknown", {"end"}, ["t"], 0.90, "name", "name 't', inputs paired, size unknown"),
    # a name hit on an inner step of the chain counts as a name, as the end's does
    ("match", "unknown", {"step"}, [], 0.90, "name", "same name, inputs paired, size unknown"),
    # a node name alone locates by name but is not a tensor name (no +0.05, 0.65 base)
    ("match", "unknown", {"node"}, [], 0.85, "structure", "same node name, inputs paired, size unknown"),
    # inputs not known (upstream unpaired)
    ("unknown", "equal", {"end"}, ["t"], 0.90, "name", "name 't', same size"),
    ("unknown", "unknown", {"step"}, ["u"], 0.80, "name", "name 'u', size unknown"),
    ("unknown", "equal", {"node"}, [], 0.75, "name", "same node name, same size"),
    ("unknown", "unknown", {"node"}, [], 0.65, "name", "same node name, size unknown"),
    # a different element count adds nothing to the evidence ("" dropped)
    ("unknown", "differ", {"node"}, [], 0.65, "name", "same node name"),
])
def test_confidence_and_evidence_follow_the_rules(inputs: str, shape: str, hits: Set[str], names: List[str],
                                                  confidence: float, located_by: str, evidence: str) -> None:
    cand = scored(inputs, shape, hits, names)
    assert cand.confidence == pytest.approx(confidence)
    assert cand.located_by == located_by
    assert cand.evidence == evidence


def test_the_fusion_penalty_is_taken_off_and_its_notes_shown() -> None:
    cand = scored("match", "equal", {"end"}, ["t"], penalty=0.2, notes=["Relu missing on one side"])
    assert cand.confidence == pytest.approx(0.8)  # 1.0 - 0.2
    assert cand.evidence == "name 't', inputs paired, same size, Relu missing on one side"
    # never below zero
    assert scored("unknown", "differ", {"node"}, penalty=0.4 + 0.4).confidence == 0.0


def test_the_same_signature_lifts_a_weak_candidate_to_095_and_says_so() -> None:
    cand = scored("match", "unknown", penalty=0.2, same_sig=True)
    assert cand.confidence == pytest.approx(0.95)  # 0.85 - 0.2 = 0.65, lifted
    assert cand.evidence == "same computation, inputs paired, size unknown"
    # a stronger one keeps its own
    assert scored("match", "equal", {"end"}, ["t"], same_sig=True).confidence == pytest.approx(1.0)
