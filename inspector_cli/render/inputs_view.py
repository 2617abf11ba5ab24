"""Table of an `InputsResult`: one row per input with dtype, shapes and value statistics."""
from __future__ import annotations

from ..results.inputs import InputsResult
from .table import FAIL, WARN, Cell, Table, View, fmt_value


def inputs_view(result: InputsResult) -> View:
    title = f"{result.inputs.get('source', '')}: {result.samples} sample(s)"
    if result.action == "make":
        title = f"written to {result.out}: {len(result.written)} sample(s)"
    table = Table(title=title, columns=["input", "dtype", "shape", "min", "max", "mean", "std", "NaN", "Inf",
                                        "looks like"],
                  numeric=[False, False, False, True, True, True, True, True, True, False])
    for s in result.stats:
        shapes = ", ".join(s.shapes) if len(s.shapes) <= 2 else f"{s.shapes[0]} (+{len(s.shapes) - 1} more)"
        table.add(s.name, "/".join(s.dtypes), shapes, fmt_value(s.min), fmt_value(s.max), fmt_value(s.mean),
                  fmt_value(s.std), Cell(str(s.nan), FAIL if s.nan else None), Cell(str(s.inf), FAIL if s.inf else None),
                  Cell(s.looks_like, WARN if s.looks_like.endswith("[0, 255]") and "float" in "".join(s.dtypes)
                       else None))
    options = result.inputs.get("reader_options") or {}
    notes = [f"warning: {w}" for w in result.warnings]
    if options.get("preprocess"):
        spec = options["preprocess"]
        notes.append("preprocessing: " + ", ".join(f"{k}={v}" for k, v in spec.items()))
    if options.get("raw"):
        layouts = (options["raw"].get("inputs") or {})
        notes.append("raw .bin: " + ", ".join(f"{n} {v['dtype']} {v['shape']}" for n, v in layouts.items()))
    return View(tables=[table], notes=notes, verdict=result.summary(), passed=result.passed)
