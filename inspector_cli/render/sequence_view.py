"""Tables of a `SequenceResult`: the state wiring, the first events, per-output and per-state summaries."""
from __future__ import annotations

from typing import Dict, List

from ..results.sequence import SequenceResult, StepSummary
from .table import FAIL, MUTED, OK, WARN, Cell, Table, View, fmt_value

METRICS = ("cosine", "max_abs", "sqnr")


def sequence_view(result: SequenceResult) -> View:
    """Wiring, events, then one row per compared tensor (worst value, its step, mean)."""
    view = View(passed=result.passed, verdict=result.summary())
    wiring = Table(title="state wiring", columns=["output (step t)", "input (step t+1)", "dtype", "shape", "found"])
    for row in result.wiring:
        wiring.add(row.output, row.input, row.dtype, row.shape + (" KV" if row.kv_cache else ""), row.source)
    if not result.wiring:
        wiring.add(Cell("no state: every step is independent", MUTED), "", "", "", "")
    view.tables.append(wiring)
    view.tables.append(_events(result))
    if result.outputs or result.states:
        view.tables.append(_summaries("per step, over all steps", result.outputs + result.states))
    if result.layers is not None:
        view.tables.append(_layers(result))
    if result.decode is not None:
        d = result.decode
        table = Table(title=f"decode ({d.mode})", columns=["", "tokens"])
        table.add("A", " ".join(map(str, d.tokens_a[:32])) + (" …" if len(d.tokens_a) > 32 else ""))
        table.add("B", " ".join(map(str, d.tokens_b[:32])) + (" …" if len(d.tokens_b) > 32 else ""))
        view.tables.append(table)
    if result.decode_runs:
        runs = Table(title="decode, per prompt", columns=["prompt", "prompt tokens", "agreement", "first differing token"])
        for run in result.decode_runs:
            runs.add(str(run.prompt), str(run.prompt_length), f"{run.agreement:.1%}",
                     "-" if run.first_difference is None else f"step {run.first_difference}")
        view.tables.append(runs)
    view.notes = list(result.notes) + (list(result.layers.notes) if result.layers is not None else [])
    return view


def _layers(result: SequenceResult) -> Table:
    """The diverging step's layers: the first divergence, then the worst by cosine (A's state fed to both)."""
    section = result.layers
    assert section is not None
    table = Table(title=f"layers at step {section.step} (both models fed the step's inputs and A's state)",
                  columns=["tensor", "op", "cosine", "max_abs", ""])
    by_name = {row.tensor: row for row in section.layers}
    shown = ([section.first_divergence] if section.first_divergence else []) + \
        [t for t in section.worst if t != section.first_divergence]
    for name in shown:
        row = by_name[name]
        mark = "first divergence" if name == section.first_divergence else "worst"
        table.add(row.tensor, row.op, fmt_value(row.cosine, "cosine"), fmt_value(row.max_abs, "max_abs"),
                  Cell(mark, FAIL if row.failed else WARN))
    if not shown:
        table.add(Cell(f"{len(section.layers)} layer(s) compared; none diverged", OK), "", "", "", "")
    return table


def _events(result: SequenceResult) -> Table:
    table = Table(title="events", columns=["event", "step", "detail"])
    table.add("steps run", str(result.steps), f"{result.resumed_steps} resumed" if result.resumed_steps else "")
    if result.nonfinite is not None:
        n = result.nonfinite
        detail = f"model {n.model}: {', '.join(n.tensors)}" + (f"; inputs + state in {n.handoff}" if n.handoff else "")
        allowed = " (allowed: --allow-nonfinite)" if result.nonfinite_allowed else ""
        table.add(Cell("first non-finite value", WARN if result.nonfinite_allowed else FAIL), str(n.step), detail + allowed)
    if result.first_gate_failure is not None:
        table.add(Cell("first gate failure", FAIL), str(result.first_gate_failure), "")
    if result.first_decision_difference is not None:
        what = "first differing token" if result.mode == "decode" else f"first differing decision ({result.decision_output})"
        table.add(Cell(what, WARN), str(result.first_decision_difference),
                  "" if result.decision_agreement is None else f"agreement {result.decision_agreement:.1%}")
    if result.divergence is not None:
        d = result.divergence
        replay = fmt_value(d.replay.get("cosine"), "cosine") if d.replay else "n/a"
        born = {"state": "born in the state", "step": "born in the step"}.get(d.born, "origin unknown")
        table.add(Cell(born, WARN if d.born == "state" else FAIL), str(d.step),
                  f"{d.detail}; B fed A's state: cosine {replay}; state cosine {fmt_value(d.state_cosine, 'cosine')}")
    if len(table.rows) == 1:
        table.add(Cell("no divergence", OK), "", "")
    return table


def _summaries(title: str, rows: List[StepSummary]) -> Table:
    columns = ["tensor", "role"]
    for metric in METRICS:
        columns += [f"worst {metric}", "at step"]
    columns += ["mean cosine", "non-finite"]
    table = Table(title=title, columns=columns)
    for s in rows:
        cells: List[object] = [s.tensor, s.role]
        for metric in METRICS:
            cells += [fmt_value(s.worst.get(metric), metric), str(s.worst_step.get(metric, ""))]
        cells.append(fmt_value(s.mean.get("cosine"), "cosine"))
        cells.append(_nonfinite_cell(s.nonfinite))
        table.add(*cells)
    return table


def _nonfinite_cell(counts: Dict[str, int]) -> object:
    """NaN/Inf element counts summed over the steps: A's, B's, the mismatches and the same Inf in both."""
    if not counts:
        return "0"
    text = "/".join(str(counts.get(k, 0)) for k in ("nonfinite_a", "nonfinite_b", "nonfinite_mismatch", "nonfinite_same"))
    if counts.get("nonfinite_mismatch"):
        return Cell(f"{text} from step {counts.get('first_step', '?')}", FAIL)
    return text
