"""Decode mode for causal LMs: greedy decoding of A and B from one prompt, the KV cache fed back.

Step 0 feeds the whole prompt with an empty cache (past length 0); every later step feeds one
token. `attention_mask` (ones over past + new tokens) and `position_ids` (past .. past+new-1) are
derived when the model has them. Free-running: each model continues from its own tokens, so the
texts can part; teacher-forced: both are fed A's tokens, so each step's logits stay comparable.
"""
from __future__ import annotations

import enum
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..core.runner import RuntimeConfig
from ..core.types import TensorMap
from ..diff.gates import Gate, check_gate_targets
from ..errors import InputDataError, UsageError
from ..results.base import ModelRef
from ..results.sequence import DecodeSummary, Divergence, NonFiniteStep, SequenceResult
from .bundle import write_step_bundle
from .journal import StepJournal
from .loop import Progress
from .metrics import KEEP, step_metrics, unmatched
from .model import SteppedModel, open_stepped
from .stats import SequenceStats
from .wiring import check_same_wiring

DERIVED = ("attention_mask", "position_ids")


class DecodeMode(str, enum.Enum):
    FREE_RUNNING = "free-running"
    TEACHER_FORCED = "teacher-forced"


@dataclass(frozen=True)
class DecodeConfig:
    """Greedy decoding settings (phase 2 flags: --steps, --teacher-forced, --state, gates)."""

    steps: int = 32
    mode: DecodeMode = DecodeMode.FREE_RUNNING
    state: Tuple[Tuple[str, str], ...] = ()
    logits_output: Optional[str] = None
    """Default: the output named 'logits', else the first step output."""
    token_input: Optional[str] = None
    """Default: 'input_ids', else the only integer step input."""
    gates: Tuple[Gate, ...] = ()
    journal: Optional[Path] = None
    runtime: RuntimeConfig = RuntimeConfig()
    attribute: bool = True
    bundle_dir: Optional[Path] = None
    """`--repro DIR`: the first non-finite step's inputs + cache of the model at fault (a nan-bisect sample)."""
    allow_nonfinite: bool = False
    """Report the first non-finite step without failing or stopping; metrics over the finite positions."""
    init_state: Optional[Path] = None
    """`--init-state`: the cache (and any other state) every prompt starts from, by input name; the
    past length is its sequence axis' size (default: empty caches)."""
    shapes: Tuple[Tuple[str, Tuple[int, ...]], ...] = ()
    """`--shape`: a state input's initial shape, or one symbolic dim of the state (sequence/cachedims)."""

    def to_dict(self) -> Dict[str, Any]:
        return {"steps": self.steps, "mode": self.mode.value, "state": [f"{a}={b}" for a, b in self.state],
                "init_state": str(self.init_state) if self.init_state else None,
                "shapes": {n: list(d) for n, d in self.shapes},
                "logits_output": self.logits_output, "token_input": self.token_input,
                "gates": [g.describe() for g in self.gates], "journal": str(self.journal) if self.journal else None,
                "bundle_dir": str(self.bundle_dir) if self.bundle_dir else None,
                "allow_nonfinite": self.allow_nonfinite, "runtime": self.runtime.to_dict()}


def read_prompt(path: "str | Path") -> List[int]:
    """Token ids of a one-prompt file (see `read_prompts`)."""
    prompts = read_prompts(path)
    if len(prompts) != 1:
        raise InputDataError(f"{path}: holds {len(prompts)} prompts, one was expected")
    return prompts[0]


def read_prompts(path: "str | Path") -> List[List[int]]:
    """The prompts of a file, each a list of token ids (mi has no tokenizer):

    - JSON: a list of ids (one prompt), a list of lists (one prompt each), or {"input_ids": either};
    - .npy: integers [n] or [1, n] (one prompt), [N, n] (N prompts of n tokens);
    - .txt: one prompt per non-empty line, ids separated by spaces or commas."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"{path}: no such prompt file")
    suffix = path.suffix.lower()
    if suffix == ".npy":
        try:
            array = np.load(path, allow_pickle=False)
        except (ValueError, OSError) as exc:
            raise InputDataError(f"{path}: not a readable .npy of token ids ({exc})") from exc
        if array.dtype.kind not in "iu" or array.ndim not in (1, 2):
            raise InputDataError(f"{path}: token ids must be integers of shape [n] or [prompts, n], got "
                                 f"{array.dtype} {list(array.shape)}")
        prompts = [[int(t) for t in row] for row in array.reshape(-1, array.shape[-1])]
    elif suffix == ".txt":
        lines = [ln for ln in path.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
        try:
            prompts = [[int(t) for t in line.replace(",", " ").split()] for line in lines]
        except ValueError as exc:
            raise InputDataError(f"{path}: not token ids ({exc}); mi has no tokenizer, give integers") from exc
    else:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise InputDataError(f"{path}: not JSON token ids ({exc})") from exc
        if isinstance(data, dict):
            data = data.get("input_ids")
        if isinstance(data, list) and data and all(isinstance(p, list) for p in data):
            prompts = data
        else:
            prompts = [data]
        if not all(isinstance(p, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in p) for p in prompts):
            raise InputDataError(f"{path}: expected a JSON list of token ids, e.g. [464, 3290, 318] "
                                 "(or a list of such lists, one per prompt)")
    if not prompts or not all(prompts):
        raise InputDataError(f"{path}: the prompt holds no tokens" if len(prompts) < 2
                             else f"{path}: prompt {[len(p) for p in prompts].index(0)} holds no tokens")
    return [list(p) for p in prompts]


class _Decoder:
    """One model's side of the decode: its cache, its past length and the derived inputs."""

    def __init__(self, model: SteppedModel, token_input: str, init_state: Optional[Path] = None) -> None:
        self.model, self.token_input, self.init_state = model, token_input, init_state
        self.state: Optional[TensorMap] = None
        self.past = 0
        if init_state is not None:  # a cache given: the prompt continues after its past
            first = self.model.initial_state({token_input: np.zeros((1, 1), np.int64)}, init_state)[0]
            self.past = past_length(model, first)

    def feeds(self, tokens: Sequence[int]) -> TensorMap:
        ids = np.asarray([list(tokens)], dtype=np.int64)
        feeds: TensorMap = {self.token_input: ids}
        names = set(self.model.wiring.step_inputs)
        if "attention_mask" in names:
            feeds["attention_mask"] = np.ones((1, self.past + len(tokens)), dtype=np.int64)
        if "position_ids" in names:
            feeds["position_ids"] = np.arange(self.past, self.past + len(tokens), dtype=np.int64)[None]
        dtypes = self.model.dtypes
        return {k: (v.astype(dtypes[k]) if dtypes.get(k) is not None else v) for k, v in feeds.items()}

    def step(self, tokens: Sequence[int], step: int) -> Tuple[TensorMap, TensorMap, TensorMap]:
        """Run on `tokens`; returns (feeds, state fed in, outputs) and advances the cache."""
        feeds = self.feeds(tokens)
        if self.state is None:
            self.state, _ = self.model.initial_state(feeds, self.init_state)
        state = self.state
        outputs = self.model.run(feeds, state, step)
        self.state = self.model.wiring.feed_back(outputs)
        self.past += len(tokens)
        return feeds, state, outputs


def past_length(model: SteppedModel, state: TensorMap) -> int:
    """The past length of a KV cache: its first KV-cache input's size along the axis it grows."""
    from .wiring import growing_axis

    specs = {t.name: t for t in model.inputs}
    for pair in model.wiring.pairs:
        if not pair.kv_cache or pair.input not in state:
            continue
        axis = growing_axis(pair, specs[pair.input], model.dims, {})
        value = state[pair.input]
        if axis is not None and axis < value.ndim:
            return int(value.shape[axis])
    return 0


def _pick(model: SteppedModel, config: DecodeConfig) -> Tuple[str, str]:
    step_inputs = list(model.wiring.step_inputs)
    token = config.token_input or ("input_ids" if "input_ids" in step_inputs else None)
    if token is None:
        ints = [t.name for t in model.inputs if t.name in step_inputs and t.numpy_dtype is not None
                and t.numpy_dtype.kind in "iu" and t.name not in DERIVED]
        token = ints[0] if len(ints) == 1 else None
    if token is None or token not in step_inputs:
        raise UsageError(f"model A: cannot tell which input takes the token ids (step inputs: {', '.join(step_inputs)})",
                         hint="name it input_ids, or give the token input explicitly")
    extra = [n for n in step_inputs if n not in (token,) + DERIVED]
    if extra:
        raise UsageError(f"model A: input '{extra[0]}' is neither the tokens, a derived input ({', '.join(DERIVED)}) "
                         f"nor wired state", hint=f"wire it with --state {extra[0]}=OUTPUT")
    outputs = list(model.wiring.step_outputs)
    logits = config.logits_output or ("logits" if "logits" in outputs else (outputs[0] if outputs else None))
    if logits is None or logits not in outputs:
        raise UsageError(f"model A: no logits output among {', '.join(outputs) or 'the step outputs'}")
    return token, logits


def decode_compare(model_a: Any, model_b: Any, prompt: "Sequence[int] | Sequence[Sequence[int]] | str | Path",
                   config: DecodeConfig = DecodeConfig(), progress: Optional[Progress] = None) -> SequenceResult:
    """Greedy-decode `config.steps` tokens with A and B from `prompt`: token ids, several prompts (a
    list of token lists) or a prompt file. Several prompts are decoded one after another (each from
    empty caches) into one result: steps are numbered across the run (prompt i's decode step k is
    step i * steps + k), `decode_runs` holds one summary per prompt."""
    prompts = read_prompts(prompt) if isinstance(prompt, (str, Path)) else _as_prompts(prompt)
    a = model_a if isinstance(model_a, SteppedModel) else open_stepped(model_a, config.state, config.runtime, "A",
                                                                       config.shapes)
    b = model_b if isinstance(model_b, SteppedModel) else open_stepped(model_b, config.state, config.runtime, "B",
                                                                       config.shapes)
    check_same_wiring(a.wiring, b.wiring)
    for model in (a, b):
        model.hold(0)  # the KV cache grows every step: fresh output arrays (binding anew would cost more)
    token_input, logits = _pick(a, config)
    check_gate_targets(config.gates, [logits])
    stats = SequenceStats([logits], [p.output for p in a.wiring.pairs], config.gates, logits,
                          allow_nonfinite=config.allow_nonfinite)
    runs: List[DecodeSummary] = []
    divergence: Optional[Divergence] = None
    nonfinite: List[NonFiniteStep] = []
    journal = StepJournal(config.journal) if config.journal else None
    if journal is not None:
        journal.start(fresh=True)
    try:
        for index, tokens in enumerate(prompts):
            summary, found = _decode_one(a, b, token_input, logits, tokens, index, stats, journal, config, progress,
                                         attribute=divergence is None, nonfinite=nonfinite)
            runs.append(summary)
            divergence = divergence or found
            if nonfinite and not config.allow_nonfinite:
                break  # the run stops at the first non-finite step, as --sequence does
    finally:
        if journal is not None:
            journal.close()
    shown = next((r for r in runs if r.first_difference is not None), runs[0])
    source: Dict[str, Any] = {"prompt": str(prompt) if isinstance(prompt, (str, Path)) else None,
                              "prompt_tokens": list(prompts[0])}
    if len(prompts) > 1:
        source["prompts"] = len(prompts)
    return SequenceResult(
        models=[ModelRef.of(a.graph, role="A"), ModelRef.of(b.graph, role="B")], mode="decode",
        wiring=list(a.wiring.pairs), steps=sum(r.steps for r in runs), outputs=stats.output_summaries(),
        states=stats.state_summaries(), gates=stats.gate_outcomes(), first_gate_failure=stats.first_gate_failure,
        decision_output=logits, first_decision_difference=stats.first_decision_difference,
        decision_agreement=stats.agreement(), divergence=divergence, decode=shown,
        decode_runs=runs if len(runs) > 1 else [], timeline=stats.timeline_result(), source=source,
        nonfinite=nonfinite[0] if nonfinite else None, nonfinite_allowed=config.allow_nonfinite,
        journal=str(config.journal) if config.journal else None, config=config.to_dict(), notes=list(a.wiring.notes))


def _as_prompts(prompt: "Sequence[int] | Sequence[Sequence[int]]") -> List[List[int]]:
    items = list(prompt)
    if items and not isinstance(items[0], (int, np.integer)):
        return [[int(t) for t in p] for p in items]  # type: ignore[union-attr]
    return [[int(t) for t in items]]  # type: ignore[arg-type]


def _decode_one(a: SteppedModel, b: SteppedModel, token_input: str, logits: str, tokens: List[int], index: int,
                stats: SequenceStats, journal: Optional[StepJournal], config: DecodeConfig,
                progress: Optional[Progress], attribute: bool,
                nonfinite: List[NonFiniteStep]) -> Tuple[DecodeSummary, Optional[Divergence]]:
    """One prompt from empty caches; its steps are folded into `stats` as steps index * steps + k.
    The first non-finite step (of either model) is appended to `nonfinite`; the prompt stops there
    unless non-finite values are allowed."""
    dec_a, dec_b = _Decoder(a, token_input, config.init_state), _Decoder(b, token_input, config.init_state)
    tokens_a: List[int] = []
    tokens_b: List[int] = []
    divergence: Optional[Divergence] = None
    offset = index * config.steps
    next_a, next_b = list(tokens), list(tokens)
    for step in range(config.steps):
        feeds_a, state_a, out_a = dec_a.step(next_a, step)
        feeds_b, state_b, out_b = dec_b.step(next_b, step)
        last_a, last_b = out_a[logits][:, -1], out_b[logits][:, -1]
        tok_a, tok_b = int(last_a.reshape(-1, last_a.shape[-1])[0].argmax()), int(last_b.reshape(-1, last_b.shape[-1])[0].argmax())
        tokens_a.append(tok_a)
        tokens_b.append(tok_b)
        allow = config.allow_nonfinite
        record = {"step": offset + step, "outputs": {logits: step_metrics(last_a, last_b, True, allow)},
                  "states": {p.output: step_metrics(out_a[p.output], out_b[p.output], False, allow)
                             for p in a.wiring.pairs if out_a[p.output].shape == out_b[p.output].shape},
                  "decision": [[tok_a], [tok_b]], "tokens": [tok_a, tok_b]}
        if index:
            record["prompt"] = index
        failed, differs = stats.fold(record)
        if attribute and divergence is None and (failed if config.gates else differs):
            divergence = _attribute(b, feeds_b, state_a, state_b, out_a, logits, step, failed, differs, config)
            if index:
                divergence = replace(divergence, step=offset + step, detail=f"prompt {index}: {divergence.detail}")
        if journal is not None:
            journal.append(record)
        found = None if nonfinite else _nonfinite_step(record, offset + step, ((a, feeds_a, state_a), (b, feeds_b, state_b)),
                                                       config)
        if found is not None:
            nonfinite.append(found)
            if not config.allow_nonfinite:
                break
        next_a = [tok_a]
        next_b = [tok_a] if config.mode == DecodeMode.TEACHER_FORCED else [tok_b]
        if progress:
            progress(offset + step, config.steps * (index + 1))
    same = sum(1 for x, y in zip(tokens_a, tokens_b) if x == y)
    first = next((i for i, (x, y) in enumerate(zip(tokens_a, tokens_b)) if x != y), None)
    return DecodeSummary(config.mode.value, len(tokens), len(tokens_a), tokens_a, tokens_b,
                         same / len(tokens_a) if tokens_a else 1.0, first, prompt=index), divergence


def _nonfinite_step(record: Dict[str, Any], step: int, sides: Sequence[Tuple[SteppedModel, TensorMap, TensorMap]],
                    config: DecodeConfig) -> Optional[NonFiniteStep]:
    """The step's non-finite finding, A's side first: the logits (last position) with a NaN or an Inf
    the other model lacks there, or a present (KV cache) with any NaN/Inf; None when there is none.
    With `bundle_dir`, the model's inputs at that step (tokens, derived inputs, the cache fed in)
    are written as a nan-bisect sample."""
    for model, feeds, state in sides:
        side = "a" if model.role == "A" else "b"
        bad = [name for name, row in record["outputs"].items() if unmatched(row, side) > 0]
        bad += [name for name, row in record["states"].items() if row.get(f"nonfinite_{side}")]
        if not bad:
            continue
        merged = {**feeds, **state}
        handoff = None
        if config.bundle_dir is not None:
            handoff = str(write_step_bundle(config.bundle_dir, str(model.graph.path or model.graph.display_name),
                                            model.role, step, merged, model.wiring, bad))
        states = {p.output for p in model.wiring.pairs}
        inputs_finite = all(v.dtype.kind != "f" or bool(np.isfinite(v).all()) for v in merged.values())
        return NonFiniteStep(step, model.role, bad, any(n in states for n in bad), inputs_finite=inputs_finite,
                             handoff=handoff, repro=str(Path(handoff).parent) if handoff else None)
    return None


def _attribute(b: SteppedModel, feeds_b: TensorMap, state_a: TensorMap, state_b: TensorMap, out_a: TensorMap,
               logits: str, step: int, failed: List[str], differs: bool, config: DecodeConfig) -> Divergence:
    """B's step replayed with A's cache: does B then choose A's token / pass the gates?"""
    trigger = "gate" if failed else "token"
    detail = failed[0] if failed else f"token differs at decode step {step}"
    drift = [step_metrics(state_a[k], state_b[k], False, config.allow_nonfinite).get("cosine")
             for k in state_a if state_a[k].shape == state_b[k].shape and state_a[k].size]
    drift_value = min((d for d in drift if d is not None), default=None)
    if not config.attribute or step == 0:
        # Step 0 starts from the same empty cache: nothing was carried, the step itself differs.
        return Divergence(step, trigger, detail, "step" if step == 0 else "unknown", state_cosine=drift_value)
    replay = b.run(feeds_b, b.cast(state_a), step)
    last_a, last_r = out_a[logits][:, -1], replay[logits][:, -1]
    metrics = step_metrics(last_a, last_r, True, config.allow_nonfinite)
    agrees = int(last_a.reshape(-1, last_a.shape[-1])[0].argmax()) == int(last_r.reshape(-1, last_r.shape[-1])[0].argmax())
    # NaN logits whose argmax happens to be A's token do not agree: the replay must say what it shows
    agrees = agrees and (config.allow_nonfinite or not metrics.get("nonfinite_mismatch"))
    if failed:
        from ..diff.metrics import metric_value_ok

        agrees = agrees and all(metric_value_ok(g.metric, metrics.get(g.metric), g.threshold) for g in config.gates)
    return Divergence(step, trigger, detail, "state" if agrees else "step",
                      replay={k: v for k, v in metrics.items() if k in KEEP}, replay_agrees=agrees,
                      state_cosine=drift_value)
