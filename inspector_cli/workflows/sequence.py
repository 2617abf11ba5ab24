"""Sequence mode of `mi compare`, `mi nan-bisect` and `mi probe` (issue 19): the models are opened
once (their wiring handed to `on_wiring` before any step runs), then the sequence engine
(`inspector_cli.sequence`) steps them; nan-bisect and probe reuse their own engines on the step
that matters (nan-bisect) or on every step as one sample (probe).
"""
from __future__ import annotations

import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from ..core.types import TensorMap
from ..errors import MiError, UsageError
from ..progress import Progress, no_progress
from ..results.base import Result
from ..results.sequence import SequenceResult, StepLayer, StepLayers
from ..sequence import DecodeConfig, SequenceConfig, SteppedModel, decode_compare, open_stepped, open_steps, run_sequence
from ..sequence.decode import read_prompts

OnWiring = Callable[[str, str], None]
StepProgress = Callable[[int, Optional[int]], None]


def _open(path: Any, config: Any, role: str, on_wiring: Optional[OnWiring],
          same_as: Optional[SteppedModel] = None) -> SteppedModel:
    """Open a stepped model and show its wiring (B's only when it differs from A's text)."""
    model = open_stepped(path, config.state, config.runtime, role, config.shapes)
    if on_wiring is not None:
        text = _wiring_text(model)
        if same_as is not None and _wiring_text(same_as) == text:
            on_wiring(f"model {role} ({model.graph.display_name})", "the same as model A")
        else:
            on_wiring(f"model {role} ({model.graph.display_name})", text)
    return model


def _wiring_text(model: SteppedModel) -> str:
    """The wiring and the state dims resolved from the model (sequence/cachedims), as printed."""
    return "\n".join([model.wiring.describe()] + (model.dims.describe(model.inputs) if model.dims else []))


def compare_sequence(model_a: Any, model_b: Any, sequence: "str | Path", config: SequenceConfig, *,
                     layers: Any = None, on_wiring: Optional[OnWiring] = None,
                     progress: Optional[StepProgress] = None) -> SequenceResult:
    """A and B stepped through `sequence`; with `layers` (a LayerConfig) the first diverging step's
    layers compared too (both models fed that step's inputs and A's carried state)."""
    a = _open(model_a, config, "A", on_wiring)
    b = _open(model_b, config, "B", on_wiring, same_as=a)
    result = run_sequence(a, b, sequence, config, progress=progress)
    if layers is None:
        return result
    if result.divergence is None:
        return replace(result, notes=result.notes + ["--layers: no step diverged, so no step's layers were compared"])
    return replace(result, layers=step_layers(a, model_a, model_b, sequence, config, result.divergence.step, layers))


def state_at(a: SteppedModel, sequence: "str | Path", config: SequenceConfig, step: int) -> Tuple[TensorMap, TensorMap]:
    """(step inputs, state carried in) of A at `step`, by stepping A alone from the start (A's
    outputs are deterministic, so this is the state the compared run carried)."""
    source = open_steps(sequence, a.step_specs, config.chunk)
    state: Optional[TensorMap] = None
    for index, feeds in source.steps(0, step + 1):
        if state is None:
            state, _ = a.initial_state(feeds, config.init_state)
        if index == step:
            return feeds, state
        state = a.wiring.feed_back(a.run(feeds, state, index))
    raise UsageError(f"{sequence}: has no step {step}")


def step_layers(a: SteppedModel, model_a: Any, model_b: Any, sequence: "str | Path", config: SequenceConfig,
                step: int, layers: Any) -> StepLayers:
    """The existing layer comparison (compare/layers) on one sample: step `step`'s inputs plus A's state."""
    from ..compare.config import CompareConfig
    from .compare import compare_models

    feeds, state = state_at(a, sequence, config, step)
    keep = config.bundle_dir is not None
    folder = Path(config.bundle_dir) / f"step_{step:06d}_layers" if keep else Path(tempfile.mkdtemp(prefix="mi-seq-"))
    folder.mkdir(parents=True, exist_ok=True)
    sample = folder / f"step_{step:06d}.npz"
    np.savez(sample, **{k: np.ascontiguousarray(v) for k, v in {**feeds, **state}.items()})
    try:
        compared = compare_models(model_a, model_b, CompareConfig(inputs=(str(sample),), runtime=config.runtime,
                                                                  layers=layers, per_sample=False))
    except MiError as exc:
        return StepLayers(step, notes=[f"the layer comparison of step {step} failed: {exc}"])
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)
    section = compared.layers
    if section is None:
        return StepLayers(step, notes=["no layer was compared"])
    rows = [StepLayer(layer.name, layer.op_a, layer.dataset.get("cosine"), layer.dataset.get("max_abs"),
                      bool(layer.failed_gates)) for layer in section.layers]
    ranked = sorted((r for r in rows if r.cosine is not None), key=lambda r: r.cosine)  # type: ignore[arg-type,return-value]
    return StepLayers(step, section.first_divergence, rows, [r.tensor for r in ranked[:5]],
                      str(sample) if keep else None, notes=list(compared.warnings))


def decode_sequence(model_a: Any, model_b: Any, prompt: "str | Path", config: DecodeConfig, *,
                    on_wiring: Optional[OnWiring] = None, progress: Optional[StepProgress] = None) -> SequenceResult:
    """Greedy decoding of A and B from the prompts of a file (token ids: .json, .npy, or .txt with one
    prompt per line); several prompts are decoded one after another into one result."""
    prompts = read_prompts(prompt)  # a bad prompt file fails before the models load
    a = _open(model_a, config, "A", on_wiring)
    b = _open(model_b, config, "B", on_wiring, same_as=a)
    result = decode_compare(a, b, prompts, config, progress=progress)
    return replace(result, source={**result.source, "prompt": str(prompt)})


def nan_bisect_sequence(model: str, sequence: "str | Path", config: SequenceConfig, nan_config: Any, *,
                        on_wiring: Optional[OnWiring] = None, progress: Optional[StepProgress] = None) -> Result:
    """The first step whose outputs or state turn non-finite, then nan-bisect on that step's inputs +
    carried state. Returns the scan's SequenceResult when no step turns non-finite."""
    from .nan_bisect import nan_bisect

    a = _open(model, config, "A", on_wiring)
    temporary = config.bundle_dir is None
    bundle = Path(tempfile.mkdtemp(prefix="mi-seq-nan-")) if temporary else Path(config.bundle_dir)  # type: ignore[arg-type]
    try:
        scan = run_sequence(a, None, sequence, replace(config, bundle_dir=bundle), progress=progress)
        found = scan.nonfinite
        if found is None or found.handoff is None:
            return scan
        bisected = nan_bisect(model, replace(nan_config, inputs=(found.handoff,)))
    finally:
        if temporary:
            shutil.rmtree(bundle, ignore_errors=True)
    what = ", ".join(found.tensors) + (" (fed-back state)" if found.in_state else "")
    line = f"sequence: the first non-finite values appear at step {found.step} ({what})"
    if not found.inputs_finite:
        line += "; the step's inputs already held NaN/Inf"
    if not temporary:
        line += f"; that step's inputs and state: {found.handoff}"
    inputs: Dict[str, Any] = {**bisected.inputs, "sequence": str(sequence), "sequence_step": found.step,
                              "sequence_steps_run": scan.steps, "nonfinite_tensors": list(found.tensors),
                              "wiring": [f"{w.input}={w.output}" for w in scan.wiring]}
    return replace(bisected, inputs=inputs, warnings=[line] + list(bisected.warnings))


def probe_sequence(model: str, sequence: "str | Path", config: SequenceConfig, probe_config: Any, *, per_step: bool,
                   on_wiring: Optional[OnWiring] = None, progress: Progress = no_progress) -> Result:
    """The probe over the steps of `sequence`, each step (its inputs + the carried state) one sample
    named step_NNNNNN: statistics over all steps, with --per-step a row per step, and --break-on
    stops at the first step meeting the condition (its sample index is the step).

    One pass: the probe's own run of each step returns the state outputs too, and they are fed into
    the next step (sequence/samples.py); nothing is written to disk and memory stays flat."""
    from ..sequence.samples import stepped_samples
    from .probe import probe_model

    a = _open(model, config, "A", on_wiring)
    samples = stepped_samples(a, open_steps(sequence, a.step_specs, config.chunk), config.steps, config.init_state)
    probed = probe_model(a.graph, replace(probe_config, per_sample=per_step or probe_config.per_sample),
                         progress=progress, samples=samples)
    wiring = ", ".join(f"{p.output}->{p.input}" for p in a.wiring.pairs) or "none"
    count = len(samples)
    note = f"sequence: {count} step(s) of {sequence}, state fed back ({wiring}); each step is one sample step_NNNNNN"
    return replace(probed, inputs={**probed.inputs, "sequence": str(sequence), "steps": count},
                   warnings=[note] + list(probed.warnings))
