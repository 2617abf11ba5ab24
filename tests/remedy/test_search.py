"""The search of `mi fix` (issue 44): a catastrophic quantisation gets an answer by reverting groups, a long
search resumes from its journal without running its trials again, and workers give the same plan.

On the code before issue 44 none of this existed: `--fallback-plan` stopped at its budget (10 candidates,
50 runs) with no plan on a model whose every quantiser is broken (the first test's fallback half shows it on
today's engine).
"""
from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from inspector_cli.executor.base import ExecutorSpec
from inspector_cli.remedy.evaluate import parse_target
from inspector_cli.remedy.fallback import plan_fallback
from inspector_cli.remedy.fix import plan_fix
from inspector_cli.remedy.groups import bisect_accept, make_groups
from inspector_cli.remedy.qdq_patch import quantised_nodes
from inspector_cli.remedy.search import downgrade


def _every_scale(model: onnx.ModelProto, factor: float) -> onnx.ModelProto:
    """Every activation quantiser's scale multiplied by `factor` (< 1: every tensor saturates)."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    inits = {t.name: t for t in model.graph.initializer}
    scales = {n.input[1] for n in model.graph.node if n.op_type == "QuantizeLinear" and n.input[0] not in inits}
    for name in scales:
        value = numpy_helper.to_array(inits[name]) * factor
        inits[name].CopyFrom(numpy_helper.from_array(value.astype(np.float32), name))
    return model


def _cosine(model, fp32, samples):
    import onnxruntime as ort

    def run(m):
        s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        return np.concatenate([s.run(None, x)[0].ravel() for x in samples]).astype(np.float64)

    a, b = run(fp32), run(model)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


@pytest.fixture(scope="module")
def catastrophic(broken_pair):
    qdq = onnx.load(broken_pair["folder"] / "int8.onnx")
    return _every_scale(qdq, 1 / 12)


def test_groups_answer_a_catastrophic_quantisation(broken_pair, catastrophic):
    fp32, samples = broken_pair["fp32"], broken_pair["samples"]
    targets = [parse_target("cosine>=0.999")]
    assert _cosine(catastrophic, fp32, samples) < 0.9
    # today's search: one candidate at a time, budget of 1 candidate -> no plan
    old = plan_fallback(fp32, catastrophic, samples, targets, max_nodes=1, max_runs=8)
    assert not old.found
    plan = plan_fix(fp32, catastrophic, samples, targets, remedies=("float",), max_nodes=1, max_runs=8)
    assert plan.found and plan.strategy == "groups"
    # the plan's model, run by plain onnxruntime, meets the target and reads what the plan says
    cosine = _cosine(plan.model, fp32, samples)
    assert cosine >= 0.999 and abs(cosine - plan.final["cosine>=0.999"]) < 1e-9
    quantised = len(quantised_nodes(catastrophic))
    assert plan.float_share == pytest.approx(len(plan.applied.float_nodes) / quantised)
    assert plan.near_float == (plan.float_share >= 0.5)
    assert plan.groups and all(row.nodes >= 1 for row in plan.groups)
    # every group kept in float was needed: re-quantising it (with the others as planned) read below target
    assert all(row.requantised["cosine>=0.999"] < 0.999 for row in plan.groups if row.kept_float and not row.untried)


def test_resume_replays_the_journal(broken_pair, catastrophic, tmp_path):
    fp32, samples = broken_pair["fp32"], broken_pair["samples"]
    targets = [parse_target("cosine>=0.999")]
    journal = tmp_path / "fix.journal"
    first = plan_fix(fp32, catastrophic, samples, targets, max_nodes=1, max_runs=8, journal=journal)
    lines = journal.read_text().splitlines()
    assert json.loads(lines[0])["kind"] == "mi-fix-journal" and len(lines) == first.runs  # header + trials
    # stopped half-way: the last trials are lost; the resumed search runs only those again
    journal.write_text("\n".join(lines[: len(lines) // 2]) + "\n")
    again = plan_fix(fp32, catastrophic, samples, targets, max_nodes=1, max_runs=8, journal=journal, resume=True)
    assert again.replayed == len(lines) // 2 - 1
    assert [(c.remedy, c.nodes) for c in again.choices] == [(c.remedy, c.nodes) for c in first.choices]
    assert again.final == first.final and again.runs == first.runs
    with pytest.raises(Exception, match="the journal is of another search"):
        plan_fix(fp32, catastrophic, samples, [parse_target("cosine>=0.99")], journal=journal, resume=True)


def test_workers_give_the_same_plan(broken_pair):
    fp32, broken, samples = broken_pair["fp32"], broken_pair["broken"], broken_pair["samples"]
    targets = [parse_target("cosine>=0.995")]
    inline = plan_fix(fp32, broken, samples, targets, remedies=("float",))
    pooled = plan_fix(fp32, broken, samples, targets, remedies=("float",), executor=ExecutorSpec(workers=2))
    assert [(c.remedy, c.nodes) for c in pooled.choices] == [(c.remedy, c.nodes) for c in inline.choices]
    assert pooled.final == inline.final and pooled.runs == inline.runs
    def steps(plan):  # wall-clock latency aside, the same trials in the same order with the same answers
        return [{k: v for k, v in s.to_dict().items() if k != "latency_ms"} for s in plan.steps]

    assert steps(pooled) == steps(inline)


def test_bisection_rejects_exactly_the_needed_items():
    needed = {3, 11}
    tried = []

    def accept(batch):
        tried.append(list(batch))
        return not (needed & set(batch)), {}

    result = bisect_accept(16, accept, lambda: True)
    assert sorted(result.rejected) == [3, 11] and sorted(result.accepted) == [k for k in range(16) if k not in needed]
    assert len(tried) <= 2 * 2 * 4 + 1  # about 2 k log2(n / k) trials, k = 2 rejects out of 16


def test_groups_follow_name_scopes():
    units = [(f"/model/stage{s}/block{b}/conv",) for s in range(3) for b in range(3)]
    groups = make_groups(units)
    assert [g.name for g in groups] == ["model/stage0", "model/stage1", "model/stage2"]
    flat = make_groups([(f"conv{k}",) for k in range(9)])
    assert [len(g.units) for g in flat] == [3, 3, 3]


def test_early_stop_never_changes_a_verdict(broken_pair, catastrophic):
    """top1>=0.9 on 12 samples allows one miss: the catastrophic model stops at its second miss; a model that
    meets the target runs every sample; each verdict equals the full run's."""
    from inspector_cli.remedy.evaluate import Evaluator

    fp32, samples = broken_pair["fp32"], broken_pair["samples"]
    ev = Evaluator(samples, [f"s{i}" for i in range(len(samples))], [parse_target("top1>=0.9")])
    ev.set_reference(fp32.SerializeToString())
    for model, meets in ((catastrophic, False), (fp32, True)):
        full = ev.evaluate(model.SerializeToString())
        early = ev.evaluate(model.SerializeToString(), early_stop=True)
        assert full.meets == early.meets == meets and full.partial == 0
        if not meets:
            top1 = full.metrics["logits"]["top1"]
            misses_needed = 2  # the second miss makes 0.9 unreachable (at most 11 of 12 right)
            assert top1 < 0.9 and 0 < early.partial < len(samples)
            assert early.partial >= misses_needed
        else:
            assert early.partial == 0


def test_a_short_name_keeps_the_deeper_scopes():
    """EfficientNet's classifier '/model/classifier/Gemm' has 3 segments beside '/model/efficientnet/encoder/
    blocks.N/...': before, a name shorter than the depth disqualified that depth, and the zoo's NNCF int8
    EfficientNet was reverted in 2 groups (model/efficientnet, model/classifier)."""
    units = [(f"/model/efficientnet/encoder/blocks.{b}/conv{k}/Conv",) for b in range(4) for k in range(4)]
    units.append(("/model/classifier/Gemm",))
    names = [g.name for g in make_groups(units)]
    assert names == [f"model/efficientnet/encoder/blocks/{b}" for b in range(4)] + ["model/classifier"]


class _InteractingSearch:
    """A search whose targets hold unless B takes a cheaper remedy while A is still in float; A takes only a16,
    B only per-channel (what the zoo's MobileNetV2 showed: an Add at 16 bits beside float Convs)."""

    strong = "float"

    def __init__(self) -> None:
        self.ev = SimpleNamespace(runs=0, targets=[])
        self.builder = SimpleNamespace(applicable=lambda unit, remedy: True)

    def evaluate_choices(self, choices, action="", node="", full=False):
        self.ev.runs += 1
        given = {c.nodes[0]: c.remedy for c in choices}
        meets = given["A"] in ("a16", "float") and given["B"] in ("per-channel", "float") \
            and not (given["B"] != "float" and given["A"] == "float")
        return SimpleNamespace(meets=meets, summary=lambda targets: {})


def test_downgrade_repeats_while_a_pass_moves_a_node():
    """B's per-channel misses while A is in float; A goes to 16 bits in the later a16 pass, and the next round
    gives B its per-channel. Fails before (one round: B stayed in float)."""
    choices, untried = downgrade(_InteractingSearch(), ["B", "A"], ("per-channel", "a16", "float"), None, cap=50)
    assert {c.nodes[0]: c.remedy for c in choices} == {"A": "a16", "B": "per-channel"} and untried == 0


def test_a_spent_budget_reports_the_downgrade_untried():
    """The prune had spent the runs (NNCF's MobileNetV2: 65 float nodes): the downgrade ran no pass and said
    nothing, so the plan kept them in float without MI868. Fails before (untried 0)."""
    search = _InteractingSearch()
    search.ev.runs = 50
    choices, untried = downgrade(search, ["B", "A"], ("per-channel", "a16", "float"), None, cap=50)
    assert {c.nodes[0]: c.remedy for c in choices} == {"A": "float", "B": "float"}
    assert untried == 2 and search.ev.runs == 50


def test_the_downgrade_tries_the_remedy_closest_to_float_first():
    """Passes from a16 down: with runs for one trial only, the one trial moves both nodes to a16 (the largest
    saving); before, the per-channel pass came first and its trial was rejected (B at per-channel needs A out
    of float), leaving both in float."""
    class _Both(_InteractingSearch):
        def evaluate_choices(self, choices, action="", node="", full=False):
            self.ev.runs += 1
            given = {c.nodes[0]: c.remedy for c in choices}
            return SimpleNamespace(meets=all(r in ("a16", "float") for r in given.values()), summary=lambda t: {})

    search = _Both()
    choices, untried = downgrade(search, ["B", "A"], ("per-channel", "a16", "float"), None, cap=1)
    assert {c.nodes[0]: c.remedy for c in choices} == {"A": "a16", "B": "a16"} and search.ev.runs == 1
    assert untried == 2  # the per-channel pass had no run left for them


class _NeedsSearch:
    """A float-set search whose targets hold when `needed` are all in float; a miss stops after 3 samples (the
    early stop) unless the run is asked `full`; counts the runs on every sample."""

    strong = "float"

    def __init__(self, needed, gain_of=None) -> None:
        self.needed, self.gain_of = set(needed), gain_of
        self.ev = SimpleNamespace(runs=0, targets=[])
        self.quantisers = SimpleNamespace(close=lambda nodes: list(dict.fromkeys(nodes)), unit=lambda n: [n])
        self.full_runs = 0
        self.early_stop = True

    def evaluate(self, nodes, action="", node="", strict=False, full=False):
        self.ev.runs += 1
        meets = self.needed <= set(nodes)
        partial = 0 if meets or full or not self.early_stop else 3
        self.full_runs += not partial
        shortfall = 0.0 if meets else 1.0 - (self.gain_of(nodes) if self.gain_of else 0.0)
        return SimpleNamespace(meets=meets, partial=partial, shortfall=shortfall, summary=lambda targets: {})


def test_only_a_kept_group_is_measured_on_every_sample():
    """The top-down search re-measured every candidate it kept in float on every sample, the groups' and the
    candidates' inside them alike; only the groups' are reported (what each bought). On NNCF's EfficientNet
    those runs were a sixth of the search. Fails before (4 runs asked on every sample: the two candidates kept
    inside the groups too)."""
    from inspector_cli.remedy.search import top_down

    units = [(f"/m/a/n{k}",) for k in range(4)] + [(f"/m/b/n{k}",) for k in range(4)]
    search = _NeedsSearch({"/m/a/n1", "/m/b/n2"})
    asked = []
    measure = search.evaluate
    search.evaluate = lambda nodes, action="", node="", strict=False, full=False: (
        asked.append((sorted(nodes), full)), measure(nodes, action, node, strict, full))[1]
    outcome = top_down(search, units, None, cap=100)
    assert sorted(outcome.nodes) == ["/m/a/n1", "/m/b/n2"]
    assert [(row.name, row.kept_float) for row in outcome.groups] == [("m/a", True), ("m/b", True)]
    # the two groups, each re-quantised alone (the other kept in float), measured again on every sample
    a, b = [f"/m/a/n{k}" for k in range(4)], [f"/m/b/n{k}" for k in range(4)]
    assert [nodes for nodes, full in asked if full] == [b, a]
    assert all(row.requantised == {} for row in outcome.groups)  # the fake's summary


def test_a_wide_probe_that_misses_sends_the_search_top_down():
    """The top 10 candidates recover more than half the shortfall but miss; when every candidate the
    sensitivity phase would measure or order misses too, no greedy prefix of them can meet, and the search
    goes top down at once (before: 12 single-candidate runs on every sample, then the greedy, then top down)."""
    from inspector_cli.remedy.fix import _spread

    ranked = [f"n{k}" for k in range(40)]
    partly = lambda nodes: 0.6 if "n0" in nodes else 0.0  # noqa: E731
    far = _NeedsSearch({"n0", "n35"}, partly)  # n35: beyond the 22 candidates (12 measured + 10 behind)
    assert _spread(far, ranked, SimpleNamespace(shortfall=1.0), 10, sensitivity_top=None, max_runs=20)
    assert far.ev.runs == 2
    near = _NeedsSearch({"n0", "n15"}, partly)  # n15 is among them: the singles may find it
    assert not _spread(near, ranked, SimpleNamespace(shortfall=1.0), 10, sensitivity_top=None, max_runs=20)
    assert near.ev.runs == 2
    half = _NeedsSearch({"n0", "n15"}, lambda nodes: 0.3)  # less than half recovered: spread on one run
    assert _spread(half, ranked, SimpleNamespace(shortfall=1.0), 10, sensitivity_top=None, max_runs=20)
    assert half.ev.runs == 1
