"""Sequence mode: stateful models stepped through time with their state fed back (issue 19).

The Python API that `mi compare --sequence/--decode`, `mi nan-bisect --sequence` and
`mi probe --sequence` build on:

- `run_sequence(model_a, model_b, sequence, SequenceConfig(...))` -> `SequenceResult`
  (model_b None: a one-model scan for the first non-finite step, with its nan-bisect hand-off);
- `decode_compare(model_a, model_b, prompt, DecodeConfig(...))` -> `SequenceResult` (mode 'decode');
- `detect_wiring(inputs, outputs, explicit)` / `StateWiring.describe()` for printing the wiring (its pairs
  are `results.sequence.WiringRow`, the rows the result records);
- `open_steps(path, specs, chunk)` for the step inputs.

Imports onnxruntime only through core/runner (lazily), so importing this package stays cheap.
"""
from __future__ import annotations

from .decode import DecodeConfig, DecodeMode, decode_compare, read_prompt
from .loop import SequenceConfig, run_sequence
from .model import SteppedModel, open_stepped
from .source import StepSource, open_steps
from .wiring import StateWiring, detect_wiring, initial_state, parse_pairs

__all__ = ["DecodeConfig", "DecodeMode", "SequenceConfig", "StateWiring", "StepSource", "SteppedModel",
           "decode_compare", "detect_wiring", "initial_state", "open_steps", "open_stepped", "parse_pairs",
           "read_prompt", "run_sequence"]
