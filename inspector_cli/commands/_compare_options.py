"""Options of `mi compare` beyond outputs: layer-by-layer comparison, per-model runtimes, golden mode.

Kept apart from compare.py so the command stays a thin list of decorators plus one function.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import click

from ._options import DEVICES, OPT_LEVELS, ByteSize, NumberOrNamedNumber, compose

LAYER_GATE_HELP = {
    "layer-min-cosine": ("min-cosine", "Layer threshold: cosine similarity >= V (default 0.99, used to mark the "
                                       "first divergence)."),
    "layer-max-abs": ("max-abs", "Layer threshold: max |b - a| <= V."),
    "layer-min-sqnr": ("min-sqnr", "Layer threshold: SQNR >= V dB."),
}


def layer_options(func: Any) -> Any:
    gates = [click.option(f"--{flag}", f"layer_{flag[6:].replace('-', '_')}", multiple=True, type=NumberOrNamedNumber(),
                          help=f"{text} TENSOR=V limits it to tensors matching TENSOR (glob). Repeatable.")
             for flag, (_, text) in LAYER_GATE_HELP.items()]
    return compose(
        click.option("--layers", "layers", multiple=True, metavar="PATTERN",
                     help="Compare intermediate tensors too: 'all', names, globs, 're:<regex>', 'op:<Type>' (of "
                          "MODEL_A). Repeatable."),
        click.option("--granularity", type=click.Choice(("chain", "tensor")), default="chain", show_default=True,
                     help="chain: one row per fused chain (Conv+BN+Relu), its last tensor; tensor: every paired tensor."),
        *gates,
        click.option("--layer-atol", type=click.FloatRange(min=0.0), metavar="V",
                     help="Layers whose max |b - a| is at most V are negligible (rounding noise of tensors near zero, "
                          "whose cosine and SQNR mean nothing): they pass every layer threshold but --layer-max-abs "
                          "and are never the first divergence. Default 1e-5; 0 turns it off."),
        click.option("--gate-layers", is_flag=True, help="Layer thresholds decide the exit code too."),
        click.option("--isolate", multiple=True, metavar="all|worst:N|NAME",
                     help="Measure each layer's own error: run MODEL_B's producing subgraph on MODEL_A's tensors. "
                          "Repeatable."),
        click.option("--max-memory", type=ByteSize(), metavar="SIZE",
                     help="Memory for one sample's captured tensors, e.g. 512M (default: a quarter of the available "
                          "memory); beyond it tensors are captured in chunks over several runs."),
        click.option("--capture", type=click.Choice(("auto", "deployed", "instrumented")), default="auto",
                     show_default=True,
                     help="deployed: read tensors from onnxruntime's optimised graph (kernels unchanged); "
                          "instrumented: expose them in the model (changes fusions); auto: deployed for quantised "
                          "and fp16 models."),
        click.option("--worst", type=click.IntRange(min=1), default=5, show_default=True,
                     help="How many worst layers to list per metric."),
        click.option("--no-observer-check", is_flag=True,
                     help="Skip the plain run of the first sample that checks capturing did not change the outputs."),
    )(func)


def model_runtime_options(func: Any) -> Any:
    return compose(
        click.option("--a-opt-level", type=click.Choice(OPT_LEVELS), help="Optimisation level of MODEL_A only."),
        click.option("--b-opt-level", type=click.Choice(OPT_LEVELS), help="Optimisation level of MODEL_B only."),
        click.option("--a-providers", metavar="LIST", help="Execution providers of MODEL_A only."),
        click.option("--b-providers", metavar="LIST", help="Execution providers of MODEL_B only."),
        click.option("--a-device", type=click.Choice(DEVICES), help="Device type of MODEL_A's providers only."),
        click.option("--b-device", type=click.Choice(DEVICES), help="Device type of MODEL_B's providers only."),
        click.option("--golden", type=click.Path(exists=True, file_okay=False),
                     help="Compare MODEL_A against saved outputs: test_data_set_N/ folders (input_K.pb, output_K.pb) "
                          "or .npz files holding inputs and outputs by name."),
        click.option("--rtol", type=click.FloatRange(min=0), metavar="R",
                     help="With --golden: each value must lie within atol + R * |expected| (numpy's allclose, "
                          "ONNX's backend tests: 1e-3), else MI806; NaN/Inf at the same place agree."),
        click.option("--atol", type=click.FloatRange(min=0), metavar="A",
                     help="With --golden: the absolute part of that tolerance (ONNX's backend tests: 1e-7)."),
    )(func)


def _with(runtime: Any, level: Optional[str], providers: Optional[str], device: Optional[str]) -> Any:
    from ..core.runner import OptLevel

    changes: Dict[str, Any] = {}
    if level:
        changes["opt_level"] = OptLevel(level)
    if providers:
        changes["providers"] = tuple(p.strip() for p in providers.split(",") if p.strip())
    if device:
        changes["device"] = device
    return runtime.replace(**changes) if changes else runtime


def build_runtimes(params: Dict[str, Any], base: Any) -> "tuple[Any, Optional[Any]]":
    """(runtime of A, runtime of B or None when B runs like A)."""
    runtime_a = _with(base, params.get("a_opt_level"), params.get("a_providers"), params.get("a_device"))
    runtime_b = _with(base, params.get("b_opt_level"), params.get("b_providers"), params.get("b_device"))
    if params.get("a_providers") or params.get("b_providers"):
        from ..core.providers import check_option_targets

        check_option_targets(base.provider_options, [runtime_a.providers, runtime_b.providers])
    return runtime_a, (runtime_b if runtime_b != runtime_a else None)


def build_layer_config(params: Dict[str, Any]) -> Any:
    """LayerConfig from the flags, or None without --layers."""
    from ..compare.config import DEFAULT_LAYER_ATOL, LayerConfig
    from ..diff.gates import parse_gate
    from ..errors import UsageError

    patterns = tuple(params.get("layers") or ())
    isolate = tuple(params.get("isolate") or ())
    if not patterns:
        used = [f for f in ("isolate", "gate_layers") if params.get(f)]
        used += ["layer_atol"] * (params.get("layer_atol") is not None)
        if used:
            raise UsageError(f"--{used[0].replace('_', '-')} needs --layers", hint="add --layers all")
        return None
    gates = []
    for flag, (base, _) in LAYER_GATE_HELP.items():
        for value in params.get(f"layer_{flag[6:].replace('-', '_')}") or ():
            gate = parse_gate(base, value)
            gates.append(type(gate)(flag=flag, metric=gate.metric, threshold=gate.threshold, target=gate.target))
    max_memory = params.get("max_memory") or None
    return LayerConfig(patterns=patterns, granularity=params.get("granularity") or "chain", gates=tuple(gates),
                       gate_layers=bool(params.get("gate_layers")), isolate=isolate, max_memory=max_memory,
                       capture=params.get("capture") or "auto", worst=params.get("worst") or 5,
                       observer_check=not params.get("no_observer_check"),
                       atol=DEFAULT_LAYER_ATOL if params.get("layer_atol") is None else float(params["layer_atol"]))
