"""Single candidates measured where the quantised model errs most (remedy/subset.py, issue 44's wall time).

On the code before, every single-candidate run of the sensitivity phase ran on every sample: on NNCF's
catastrophic EfficientNet, 36 runs of 100 samples, a third of the search. These tests fail there: there is no
`subset` module, no `RemedySearch.measure_alone` and no `ranking_samples`.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import onnxruntime as ort
import pytest

from inspector_cli.executor.base import ExecutorSpec
from inspector_cli.remedy.evaluate import Evaluator, parse_target
from inspector_cli.remedy.naming import fp32_node_names
from inspector_cli.remedy.qdq_patch import quantised_nodes
from inspector_cli.remedy.remedies import Choice, RemedyBuilder
from inspector_cli.remedy.search import RemedySearch
from inspector_cli.remedy.subset import RANKING_SAMPLES, ranking_samples, worst_samples
from inspector_cli.remedy.trials import Trials

from .models import image_samples


def _logits(*rows):
    return [{"y": np.array([row], dtype=np.float32)} for row in rows]


def test_worst_samples_put_a_changed_top1_before_any_error():
    reference = _logits([3, 1, 0], [0, 2, 1], [1, 0, 5], [4, 4.5, 0], [2, 1, 1])
    candidate = _logits([3, 1, 0],  # exact
                        [0, 2, 1.5],  # same top-1, error 0.5/|ref| = 0.5/sqrt(5) = 0.2236
                        [5, 0, 1],  # top-1 changed
                        [4, 4.2, 0],  # same top-1, error 0.3/sqrt(36.25) = 0.0498
                        [1, 2, 1])  # top-1 changed
    evaluator = SimpleNamespace(targets=[parse_target("top1>=0.9")], sample_ids=[f"s{k}" for k in range(5)],
                                reference=reference, extra=None)
    assert worst_samples(evaluator, candidate, 2) == [2, 4]
    assert worst_samples(evaluator, candidate, 3) == [1, 2, 4]  # then the largest error
    assert worst_samples(evaluator, candidate, 4) == [1, 2, 3, 4]
    # a cosine target counts no miss: the errors alone order the samples (2: |(4,0,-4)|/|(1,0,5)| = 1.109;
    # 4: |(-1,1,0)|/|(2,1,1)| = 0.577; 1: 0.224)
    evaluator.targets = [parse_target("cosine>=0.99")]
    assert worst_samples(evaluator, candidate, 3) == [1, 2, 4]
    assert worst_samples(evaluator, candidate, 1) == [2]


@pytest.fixture(scope="module")
def many(broken_pair):
    """The broken CNN on 2 x RANKING_SAMPLES samples."""
    fp32, broken = broken_pair["fp32"], broken_pair["broken"]
    samples = image_samples(2 * RANKING_SAMPLES, seed=11)
    ev = Evaluator(samples, [f"s{k}" for k in range(len(samples))], [parse_target("cosine>=0.999")])
    ev.set_reference(fp32.SerializeToString())
    return fp32, broken, samples, ev


def _plain(model_bytes, samples):
    session = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    return [session.run(None, x)[0].astype(np.float64) for x in samples]


def test_ranking_samples_are_the_quantised_models_worst(many):
    """The 32 samples of largest relative error, computed here from plain onnxruntime runs."""
    fp32, broken, samples, ev = many
    a, b = _plain(fp32.SerializeToString(), samples), _plain(broken.SerializeToString(), samples)
    errors = [np.linalg.norm(x - y) / np.linalg.norm(x) for x, y in zip(a, b)]
    runs = ev.runs
    picked = ranking_samples(ev, broken.SerializeToString())
    assert picked == sorted(np.argsort(errors)[::-1][:RANKING_SAMPLES].tolist())
    assert ev.runs == runs + 1  # one run of the quantised model
    short = Evaluator(samples[:2 * RANKING_SAMPLES - 1], [f"s{k}" for k in range(2 * RANKING_SAMPLES - 1)],
                      ev.targets)
    assert ranking_samples(short, broken.SerializeToString()) is None  # too few: every sample


@pytest.mark.parametrize("workers", [1, 2])
def test_measure_alone_runs_each_candidate_on_the_subset(many, workers):
    fp32, broken, samples, ev = many
    ev = Evaluator(ev.samples, ev.sample_ids, ev.targets, reference=list(ev.reference))
    nodes = quantised_nodes(broken)
    builder = RemedyBuilder(broken, fp32, fp32_node_names(fp32, broken, nodes))
    search = RemedySearch(fp32, broken, Trials(ev, ExecutorSpec(workers=workers)), builder, "float")
    search.ranking_samples = [0, 5, 9, 40]
    units = [(nodes[0],), (nodes[-1],), ("no such node",)]
    before = ev.inferences
    measured = search.measure_alone(units)
    assert ev.inferences - before == 2 * 4 and ev.runs == 2  # the unit that cannot be built runs nothing
    assert measured[2][0] is None and "no such node" in measured[2][1]
    reference = _plain(fp32.SerializeToString(), [samples[k] for k in search.ranking_samples])
    for unit, (result, failure) in zip(units[:2], measured):
        variant = builder.build([Choice(unit, "float")])[0].SerializeToString()
        got = _plain(variant, [samples[k] for k in search.ranking_samples])
        x = np.concatenate([r.ravel() for r in reference])
        y = np.concatenate([g.ravel() for g in got])
        assert failure is None
        assert result.value(ev.targets[0]) == pytest.approx(x @ y / np.linalg.norm(x) / np.linalg.norm(y), abs=1e-9)
    assert not search.results  # not cached as verdicts on every sample
