"""model-inspector (`mi`): diagnostics for ONNX models, as a CLI and as a library.

Everything the CLI does is callable from Python; names are imported lazily so that
`import inspector_cli` (and `mi --help`) stay fast and never import onnxruntime:

    from inspector_cli import load_model, compare_models, CompareConfig
    result = compare_models("fp32.onnx", "int8.onnx", CompareConfig(inputs=("data/",)))
    print(result.passed, result.outputs[0].dataset["cosine"])
"""
from __future__ import annotations

import importlib
from typing import Any, Dict, Tuple

from .version import __version__

# public name -> (module, attribute)
_EXPORTS: Dict[str, Tuple[str, str]] = {
    "load_model": ("core.graph", "load_model"),
    "ModelGraph": ("core.graph", "ModelGraph"),
    "select_tensors": ("core.select", "select_tensors"),
    "with_outputs": ("core.expose", "with_outputs"),
    "extract_subgraph": ("core.expose", "extract_subgraph"),
    "RuntimeConfig": ("core.runner", "RuntimeConfig"),
    "OptLevel": ("core.runner", "OptLevel"),
    "Session": ("core.runner", "Session"),
    "open_session": ("core.runner", "open_session"),
    "SyntheticSpec": ("core.synthetic", "SyntheticSpec"),
    "open_samples": ("core.inputs", "open_samples"),
    "compare_arrays": ("diff.metrics", "compare_arrays"),
    "PairStats": ("diff.metrics", "PairStats"),
    "Gate": ("diff.gates", "Gate"),
    "parse_gate": ("diff.gates", "parse_gate"),
    "CompareConfig": ("compare.config", "CompareConfig"),
    "compare_models": ("workflows.compare", "compare_models"),
    "CompareResult": ("results.compare", "CompareResult"),
    "ProfileConfig": ("profile.config", "ProfileConfig"),
    "profile_model": ("workflows.profile", "profile_model"),
    "ProfileResult": ("results.profile", "ProfileResult"),
    "ProbeConfig": ("probe.config", "ProbeConfig"),
    "probe_model": ("workflows.probe", "probe_model"),
    "ProbeResult": ("results.probe", "ProbeResult"),
    "Plugin": ("plugins", "Plugin"),
    "ValidateConfig": ("validate.config", "ValidateConfig"),
    "validate_model": ("workflows.validate", "validate_model"),
    "ValidateResult": ("results.validate", "ValidateResult"),
    "NanBisectConfig": ("nanbisect.config", "NanBisectConfig"),
    "nan_bisect": ("workflows.nan_bisect", "nan_bisect"),
    "NanBisectResult": ("results.nan_bisect", "NanBisectResult"),
    "OutputDiff": ("results.compare", "OutputDiff"),
    "Finding": ("results.base", "Finding"),
    "GateOutcome": ("results.base", "GateOutcome"),
    "ModelRef": ("results.base", "ModelRef"),
    "Severity": ("results.base", "Severity"),
    "read_result": ("serialize", "read_result"),
    "write_result_json": ("serialize", "write_result_json"),
    "MiError": ("errors", "MiError"),
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'inspector_cli' has no attribute '{name}'")
    module_name, attr = _EXPORTS[name]
    value = getattr(importlib.import_module(f"{__name__}.{module_name}"), attr)
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(__all__)
