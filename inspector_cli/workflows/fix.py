"""`fix_models`: the cheapest remedies that make QUANTISED meet its targets against FP32 (issue 44).

The engine is remedy/ (`fix_run.run_fix`: compare's pairing and samples, the ranking, the search, the written
model and the exports); this module only builds the result.
"""
from __future__ import annotations

import time
from typing import Any

from ..compare.plan import ModelArg
from ..remedy.config import FixConfig
from ..results.fix import FixResult


def fix_models(fp32: ModelArg, quantised: ModelArg, config: FixConfig) -> FixResult:
    """Plan the remedies of `quantised` (an int8 QDQ model, or an fp16 conversion of `fp32`) so that every
    target of `config` holds on its samples; raises `MiError` subclasses only when no result is possible."""
    from ..remedy.fix_run import run_fix

    started = time.monotonic()
    fields: Any = run_fix(fp32, quantised, config)
    return FixResult(config=config.to_dict(), elapsed_s=round(time.monotonic() - started, 3), **fields)
