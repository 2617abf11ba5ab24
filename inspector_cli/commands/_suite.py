"""Running suite steps in-process: each step is its command's own click command.

A step's options become the command's click `default_map` (exactly as `mi -c` does), so every
command's options, conversions and checks apply unchanged, and a new command needs no code here.
The command's result is read back from `ctx.meta` (left there by `emit`), its exit code from its
return value or exception.
"""
from __future__ import annotations

import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

import click

from ..config.suite import StepSpec, Suite
from ..errors import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, describe_error
from ..results.base import ModelRef, Result
from ..results.suite import StepStatus, SuiteResult, SuiteStep
from ._output import RESULT_META_KEY
from ._state import AppState

COULD_NOT_RUN = (EXIT_USAGE, 3, EXIT_INTERNAL, EXIT_INTERRUPTED)


@dataclass
class StepOutcome:
    code: int
    result: Optional[Result]
    error: Optional[str]
    seconds: float


def invoke_step(ctx: click.Context, command: click.Command, kind: str, default_map: Dict[str, Any],
                state: AppState) -> StepOutcome:
    """Run one command with `default_map` as its configuration; never raises except on Ctrl-C."""
    ctx.meta.pop(RESULT_META_KEY, None)
    start = time.perf_counter()
    error: Optional[str] = None
    try:
        with command.make_context(kind, [], parent=ctx, default_map=default_map, obj=state) as sub:
            value = command.invoke(sub)
        code = value if isinstance(value, int) else EXIT_OK
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except click.exceptions.Abort:
        raise KeyboardInterrupt from None
    except click.ClickException as exc:
        code, error = EXIT_USAGE, exc.format_message()
    except Exception as exc:  # an MiError, or a bug in a command: neither takes the other steps down
        if state.debug:
            traceback.print_exc()
        code, error = describe_error(exc)
    result = ctx.meta.pop(RESULT_META_KEY, None)
    return StepOutcome(code, result if isinstance(result, Result) else None, error, time.perf_counter() - start)


def run_steps(ctx: click.Context, suite: Suite, commands: Mapping[str, click.Command],
              default_maps: Mapping[int, Dict[str, Any]], selected: Set[int], *, keep_going: bool,
              step_state: AppState, echo: Callable[[str], None], config: Dict[str, Any]
              ) -> Tuple[SuiteResult, bool]:
    """Run the selected steps in order; returns the suite result and whether Ctrl-C stopped it.

    Without `keep_going`, the first step that could not run (exit 2, 3, 4) stops the suite; a
    failed gate (exit 1) never does, so every gate of a suite is always evaluated.
    """
    from ..serialize import envelope

    steps: List[SuiteStep] = []
    models: List[ModelRef] = []
    total = len(selected)
    number = 0
    stopped = interrupted = False
    for spec in suite.steps:
        options = option_record(commands.get(spec.kind), default_maps.get(spec.index, {}))
        base = dict(name=spec.name, kind=spec.kind, line=spec.line, options=options)
        if spec.index not in selected:
            steps.append(SuiteStep(status=StepStatus.SKIPPED, **base))
            continue
        number += 1
        if stopped:
            steps.append(SuiteStep(status=StepStatus.NOT_RUN, summary="not run: an earlier step could not run",
                                   **base))
            continue
        echo(f"[{number}/{total}] {spec.name} ({spec.kind}) ...")
        try:
            outcome = invoke_step(ctx, commands[spec.kind], spec.kind, dict(default_maps[spec.index]), step_state)
        except KeyboardInterrupt:
            outcome = StepOutcome(EXIT_INTERRUPTED, None, "interrupted", 0.0)
            interrupted = stopped = True
        steps.append(_step_record(spec, outcome, base, envelope))
        if outcome.result is not None:
            models.extend(m for m in outcome.result.model_refs() if all(m.path != k.path for k in models))
        echo(f"[{number}/{total}] {spec.name}: exit {outcome.code} in {outcome.seconds:.1f} s: {steps[-1].summary}")
        if outcome.code in COULD_NOT_RUN and not keep_going:
            stopped = True
    result = SuiteResult(suite=str(suite.path), steps=steps, config=config,
                         models=[ModelRef(path=m.path, sha256=m.sha256, size_bytes=m.size_bytes, opset=m.opset,
                                          ir_version=m.ir_version, producer=m.producer) for m in models])
    return result, interrupted


def option_record(command: Optional[click.Command], default_map: Mapping[str, Any]) -> Dict[str, Any]:
    """A step's options keyed as the user writes them ('max-abs', not the parameter name 'gate_max_abs')."""
    names: Dict[str, str] = {}
    for param in command.params if command is not None else []:
        longs = [o[2:] for o in getattr(param, "opts", []) if o.startswith("--")]
        names[param.name or ""] = longs[0] if longs and isinstance(param, click.Option) else \
            (param.name or "").replace("_", "-")
    return {names.get(k, k.replace("_", "-")): v for k, v in default_map.items()}


def _step_record(spec: StepSpec, outcome: StepOutcome, base: Dict[str, Any], envelope: Callable) -> SuiteStep:
    if outcome.code == EXIT_OK:
        status = StepStatus.PASSED
    elif outcome.code == 1:
        status = StepStatus.FAILED
    else:
        status = StepStatus.ERROR
    if outcome.result is not None:
        summary = outcome.result.summary()
    elif outcome.error:
        summary = f"could not run: {outcome.error}"
    else:
        summary = f"exit {outcome.code}"
    document = envelope(outcome.result) if outcome.result is not None else None
    return SuiteStep(status=status, exit_code=outcome.code, summary=summary, seconds=round(outcome.seconds, 3),
                     result=document, **base)


def select_steps(suite: Suite, only: Sequence[str], skip: Sequence[str]) -> Set[int]:
    """Indexes of the steps to run: names or kinds in `only` (all when empty), minus those in `skip`."""
    from ..errors import UsageError

    def tokens(values: Sequence[str]) -> List[str]:
        return [t.strip() for v in values for t in str(v).split(",") if t.strip()]

    def matches(step: StepSpec, names: List[str]) -> bool:
        return step.name in names or step.kind in names

    only_names, skip_names = tokens(only), tokens(skip)
    for flag, names in (("--only", only_names), ("--skip", skip_names)):
        for name in names:
            if not any(matches(s, [name]) for s in suite.steps):
                raise UsageError(f"{flag} {name}: no step of {suite.path} has that name or kind",
                                 hint=f"steps: {', '.join(suite.step_names())}")
    return {s.index for s in suite.steps
            if (not only_names or matches(s, only_names)) and not matches(s, skip_names)}
