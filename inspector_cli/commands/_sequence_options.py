"""Sequence mode on the command line (issue 19): the options and the early dispatch of
`mi compare --sequence/--decode`, `mi nan-bisect --sequence` and `mi probe --sequence`.

Each command gets one decorator line and one `if` that hands over to the `run_*` function here,
so the commands stay thin and their other helpers' edits do not meet ours. The engine is
`inspector_cli.sequence`; the orchestration is `workflows/sequence.py`.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional

import click

from ._options import NamePair, compose
from ._output import app_state, check_report_paths, emit, progress_bar

F = Callable[..., Any]


def _common() -> list:
    return [
        click.option("--sequence", type=click.Path(exists=True), metavar="PATH",
                     help="Sequence mode: step the model through time with its state fed back. PATH is a folder of "
                          "step samples (step_0000.npz ...), one .npz with a leading time axis, or an .npy/.wav "
                          "cut with --chunk."),
        click.option("--state", "state_pairs", multiple=True, type=NamePair(), metavar="IN=OUT",
                     help="Feed output OUT of step t to input IN of step t+1 (default: found from the names, e.g. "
                          "h0=hn, state=stateN, past_key_values.0.key=present.0.key). Repeatable; YAML: a map."),
        click.option("--init-state", type=click.Path(exists=True, dir_okay=False), metavar="FILE.npz",
                     help="Initial state by input name (default: zeros; an empty KV cache, its dims read from "
                          "the model; --shape NAME:DIMS sets a state input's shape, --shape kv_cache_dim:16 one "
                          "symbolic dim). compare --decode: the prompt continues after the given cache."),
        click.option("--steps", type=click.IntRange(min=1), metavar="N",
                     help="Stop after N steps (default: every step of --sequence; with --decode 32)."),
        click.option("--chunk", type=click.IntRange(min=1), metavar="N",
                     help="With an .npy/.wav --sequence: N values per step along the first axis."),
    ]


def compare_sequence_options(func: F) -> F:
    """`mi compare` options of sequence and decode mode."""
    return compose(*_common(), *[
        click.option("--decision-output", metavar="NAME",
                     help="Output whose argmax is the step's decision (default: the first float output)."),
        click.option("--jsonl", "sequence_jsonl", type=click.Path(dir_okay=False), metavar="PATH",
                     help="With --sequence/--decode: append one JSON line per step (metrics, state drift, decision)."),
        click.option("--resume", "sequence_resume", is_flag=True,
                     help="With --sequence and --jsonl: continue from the journal's last checkpoint."),
        click.option("--repro", "sequence_repro", type=click.Path(file_okay=False), metavar="DIR",
                     help="With --sequence/--decode: write the first non-finite step's inputs and state to DIR "
                          "(a sample for mi nan-bisect)."),
        click.option("--allow-nonfinite", is_flag=True,
                     help="With --sequence/--decode: a NaN, or an Inf the other model lacks, is reported (counts, "
                          "first step and model) but neither fails the run (exit 1) nor stops it; metrics are then "
                          "read over the positions finite in both models."),
        click.option("--decode", is_flag=True,
                     help="Greedy-decode a causal LM with its KV cache fed back (needs --prompt)."),
        click.option("--prompt", type=click.Path(exists=True, dir_okay=False), metavar="FILE",
                     help="With --decode: token ids, a JSON list (or {\"input_ids\": [...]}) or .npy; "
                          "a .txt holds ids separated by spaces/commas. Several prompts (one per .txt line, a "
                          "JSON list of lists, an [N, n] .npy) are decoded one after another into one result."),
        click.option("--teacher-forced", is_flag=True,
                     help="With --decode: feed both models A's tokens, so every step's logits stay comparable."),
    ])(func)


def nan_sequence_options(func: F) -> F:
    """`mi nan-bisect --sequence` options."""
    return compose(*_common())(func)


def probe_sequence_options(func: F) -> F:
    """`mi probe --sequence` options."""
    return compose(*_common(), click.option(
        "--per-step", is_flag=True, help="With --sequence: one row per tensor and step (--per-sample of the steps)."))(func)


def _wiring_printer(ctx: click.Context) -> Callable[[str, str], None]:
    """Print the state wiring on stderr (unless -q): the user sees what was fed back."""
    from ..render.safe import visible

    state = app_state(ctx)

    def show(role: str, text: str) -> None:
        if not state.quiet:
            click.echo(visible(f"state wiring of {role}:"), err=True)
            for line in text.splitlines():
                click.echo(visible(f"  {line}"), err=True)
    return show


def _step_progress(progress: Callable[[int, Optional[int], str], None]) -> Callable[[int, Optional[int]], None]:
    return lambda step, total: progress(step + 1, total, f"step {step}")


def _sequence_config(params: Dict[str, Any], runtime: Any, **extra: Any) -> Any:
    from ..sequence import SequenceConfig, parse_pairs

    return SequenceConfig(state=tuple(parse_pairs(params.get("state_pairs") or ())),
                          init_state=params.get("init_state"), steps=params.get("steps"), chunk=params.get("chunk"),
                          runtime=runtime, shapes=_shapes(params), **extra)


def _shapes(params: Dict[str, Any]) -> tuple:
    """`--shape` in sequence and decode mode: a state input's initial shape or one symbolic dim of it."""
    from ..core.synthetic import parse_shape

    return tuple(parse_shape(text) for text in params.get("shape") or ())


def _refuse(params: Dict[str, Any], mode: str, flags: Dict[str, str]) -> None:
    from ..errors import UsageError

    for key, flag in flags.items():
        if params.get(key):
            raise UsageError(f"{flag} does not apply with {mode}")


def wants_compare_sequence(params: Dict[str, Any]) -> bool:
    """Sequence or decode mode; a flag of theirs alone (outputs-only compare) is a usage error."""
    from ..errors import UsageError

    if params.get("sequence") or params.get("decode"):
        return True
    if params.get("allow_nonfinite"):
        raise UsageError("--allow-nonfinite applies with --sequence/--decode (an outputs or --layers compare "
                         "reports NaN/Inf as finding MI802)")
    return False


def run_compare_sequence(ctx: click.Context, model_a: str, model_b: Optional[str], params: Dict[str, Any]) -> int:
    """`mi compare A B --sequence ...` or `--decode --prompt ...`."""
    from pathlib import Path

    from ..diff.gates import GATE_FLAGS, parse_gates
    from ..errors import UsageError
    from ..render.sequence_view import sequence_view
    from ..sequence import DecodeConfig, DecodeMode, parse_pairs
    from ..workflows.sequence import compare_sequence, decode_sequence
    from ._compare_options import build_layer_config
    from ._options import build_runtime

    decode = bool(params.get("decode"))
    mode = "--decode" if decode else "--sequence"
    if not model_b:
        raise UsageError(f"{mode} compares two models: give MODEL_B")
    if decode and params.get("sequence"):
        raise UsageError("give --sequence (stateful steps) or --decode (a causal LM), not both")
    _refuse(params, mode, {"inputs": "--inputs", "golden": "--golden", "name_map": "--map", "workers": "--workers",
                           "isolate": "--isolate", "bisect_optimizers": "--bisect-optimizers",
                           "simulated": "--simulated", "labels": "--labels"})
    if params.get("sequence_resume") and not params.get("sequence_jsonl"):
        raise UsageError("--resume needs --jsonl PATH (the journal to continue)")
    check_report_paths({"--json": params.get("json_path"), "--jsonl": params.get("sequence_jsonl")})
    gates = tuple(parse_gates({f: params.get(f"gate_{f.replace('-', '_')}") or () for f in GATE_FLAGS}))
    runtime = build_runtime(params)
    state = app_state(ctx)
    show_progress = params.get("json_path") != "-" and params.get("fmt") == "table"
    journal = Path(params["sequence_jsonl"]) if params.get("sequence_jsonl") else None
    with progress_bar(state, "decoding" if decode else "stepping", enabled=show_progress) as progress:
        if decode:
            if not params.get("prompt"):
                raise UsageError("--decode needs --prompt FILE (token ids)")
            _refuse(params, mode, {"sequence_resume": "--resume", "chunk": "--chunk", "layers": "--layers"})
            config = DecodeConfig(steps=params.get("steps") or 32, gates=gates, journal=journal, runtime=runtime,
                                  mode=DecodeMode.TEACHER_FORCED if params.get("teacher_forced")
                                  else DecodeMode.FREE_RUNNING,
                                  state=tuple(parse_pairs(params.get("state_pairs") or ())),
                                  logits_output=params.get("decision_output"),
                                  bundle_dir=Path(params["sequence_repro"]) if params.get("sequence_repro") else None,
                                  allow_nonfinite=bool(params.get("allow_nonfinite")),
                                  init_state=Path(params["init_state"]) if params.get("init_state") else None,
                                  shapes=_shapes(params))
            result = decode_sequence(model_a, model_b, params["prompt"], config, on_wiring=_wiring_printer(ctx),
                                     progress=_step_progress(progress))
        else:
            _refuse(params, mode, {"prompt": "--prompt", "teacher_forced": "--teacher-forced"})
            config = _sequence_config(params, runtime, gates=gates, decision_output=params.get("decision_output"),
                                      journal=journal, resume=bool(params.get("sequence_resume")),
                                      allow_nonfinite=bool(params.get("allow_nonfinite")),
                                      bundle_dir=Path(params["sequence_repro"]) if params.get("sequence_repro") else None)
            result = compare_sequence(model_a, model_b, params["sequence"], config, layers=build_layer_config(params),
                                      on_wiring=_wiring_printer(ctx), progress=_step_progress(progress))
    return emit(ctx, result, sequence_view, fmt=params["fmt"], json_path=params.get("json_path"))


def run_nan_sequence(ctx: click.Context, model: str, params: Dict[str, Any], nan_config: Any) -> int:
    """`mi nan-bisect MODEL --sequence ...`: the first non-finite step, then its origin node."""
    from pathlib import Path

    from ..render.nan_bisect_view import nan_bisect_view
    from ..render.sequence_view import sequence_view
    from ..results.sequence import SequenceResult
    from ..workflows.sequence import nan_bisect_sequence

    _refuse(params, "--sequence", {"inputs": "--inputs", "jsonl": "--jsonl", "resume": "--resume",
                                   "workers": "--workers", "fallback_plan": "--fallback-plan"})
    repro = Path(params["repro_dir"]) if params.get("repro_dir") else None
    config = _sequence_config(params, nan_config.runtime, bundle_dir=repro)
    state = app_state(ctx)
    with progress_bar(state, "stepping", enabled=params.get("json_path") != "-" and params.get("fmt") == "table") as bar:
        result = nan_bisect_sequence(model, params["sequence"], config, nan_config, on_wiring=_wiring_printer(ctx),
                                     progress=_step_progress(bar))
    view = sequence_view if isinstance(result, SequenceResult) else nan_bisect_view
    return emit(ctx, result, view, fmt=params["fmt"], json_path=params.get("json_path"))


def run_probe_sequence(ctx: click.Context, model: str, params: Dict[str, Any], probe_config: Any) -> int:
    """`mi probe MODEL --sequence ...`: the probe over the steps, each step one sample."""
    from ..render.probe_view import probe_view
    from ..workflows.sequence import probe_sequence

    _refuse(params, "--sequence", {"inputs": "--inputs", "workers": "--workers", "reference": "--reference"})
    config = _sequence_config(params, probe_config.runtime)
    state = app_state(ctx)
    with progress_bar(state, "probing", enabled=params.get("json_path") != "-" and params.get("fmt") == "table") as bar:
        result = probe_sequence(model, params["sequence"], config, probe_config, per_step=bool(params.get("per_step")),
                                on_wiring=_wiring_printer(ctx), progress=bar)
    return emit(ctx, result, probe_view, fmt=params["fmt"], json_path=params.get("json_path"))
