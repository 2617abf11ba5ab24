"""Rule-based hints: why did this node turn finite inputs into NaN/Inf?

Each rule looks at the node's op type, attributes and the statistics of its inputs and outputs
(and the values themselves when they are at hand, for rules that need more than counts).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import numpy as np

from ..results.nan_bisect import Hint, TensorStats

EXP_LIMIT = {"float16": math.log(65504.0), "float32": math.log(float(np.finfo(np.float32).max)),
             "float64": math.log(float(np.finfo(np.float64).max))}
"""Largest input whose exp() is finite: about 11.09 (fp16), 88.72 (fp32), 709.78 (fp64)."""
RANGE = {"float16": 65504.0, "float32": float(np.finfo(np.float32).max), "float64": float(np.finfo(np.float64).max)}
PRODUCTS = {"Mul", "MatMul", "Gemm", "Conv", "ConvTranspose", "Einsum"}
SUMS = {"Add", "Sum", "ReduceSum", "ReduceMean", "MatMul", "Gemm", "Conv", "ConvTranspose", "GlobalAveragePool",
        "AveragePool", "Einsum", "CumSum"}
NORMS = {"LayerNormalization", "InstanceNormalization", "GroupNormalization", "BatchNormalization",
         "SimplifiedLayerNormalization", "SkipLayerNormalization", "RMSNormalization"}

Context = Dict[str, Any]


def _fmt(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:.6g}"


def _has_inf(stats: TensorStats) -> bool:
    return stats.inf > 0


def _rule_sources(op: str, ins: Sequence[TensorStats], ctx: Context) -> List[Hint]:
    hints = []
    if op == "Constant":
        hints.append(Hint("corrupted-weight", "the Constant node's value itself holds NaN/Inf"))
    for s in ins:
        if s.nonfinite and s.source == "initializer":
            why = ("the model file is corrupted or was exported from a diverged checkpoint" if s.nan else
                   "an intended -Inf mask, or a weight corrupted or overflowed on export")
            hints.append(Hint("corrupted-weight", f"weight '{s.name}' holds {s.nan} NaN and {s.inf} Inf values "
                                                  f"(of {s.count}): {why}"))
        elif s.nonfinite and s.source == "input":
            hints.append(Hint("nonfinite-input", f"input '{s.name}' of the sample already holds {s.nan} NaN and {s.inf} Inf values"))
    return hints


def _rule_division(op: str, ins: Sequence[TensorStats], ctx: Context) -> List[Hint]:
    if op == "Div" and len(ins) > 1:
        num, den = ins[0], ins[1]
        if _has_inf(num) and _has_inf(den):
            return [Hint("inf-div-inf", f"Inf / Inf: both '{num.name}' and '{den.name}' hold Inf")]
        if den.zeros:
            both = " (0/0 gives NaN)" if num.zeros else ""
            return [Hint("div-by-zero", f"division by zero: divisor '{den.name}' has {den.zeros} zero(s) of {den.count}{both}")]
    if op == "Reciprocal" and ins and ins[0].zeros:
        return [Hint("div-by-zero", f"reciprocal of zero: '{ins[0].name}' has {ins[0].zeros} zero(s) of {ins[0].count}")]
    return []


def _rule_domain(op: str, ins: Sequence[TensorStats], ctx: Context) -> List[Hint]:
    if not ins:
        return []
    x = ins[0]
    if op == "Log" and (x.zeros or x.negatives):
        parts = [f"{x.negatives} negative value(s) (NaN)" if x.negatives else "",
                 f"{x.zeros} zero(s) (-Inf)" if x.zeros else ""]
        return [Hint("log-nonpositive", f"Log of values <= 0: '{x.name}' has {' and '.join(p for p in parts if p)}; "
                                        f"min {_fmt(x.min)}")]
    if op == "Sqrt" and x.negatives:
        return [Hint("sqrt-negative", f"Sqrt of negative values: '{x.name}' has {x.negatives} negative value(s), min {_fmt(x.min)}")]
    if op == "Pow" and len(ins) > 1:
        exponent = ctx.get("values", {}).get(ins[1].name)
        fractional = exponent is None or bool(np.any(np.asarray(exponent) != np.round(np.asarray(exponent))))
        if x.negatives and fractional:
            return [Hint("pow-negative", f"Pow of negative base: '{x.name}' has {x.negatives} negative value(s) "
                                         f"raised to a non-integer exponent '{ins[1].name}'")]
        if x.zeros and ins[1].min is not None and ins[1].min < 0:
            return [Hint("div-by-zero", f"Pow of zero to a negative exponent: '{x.name}' has {x.zeros} zero(s)")]
    if op in ("Acos", "Asin") and ((x.max or 0) > 1 or (x.min or 0) < -1):
        return [Hint("domain", f"{op} of values outside [-1, 1]: '{x.name}' spans [{_fmt(x.min)}, {_fmt(x.max)}]")]
    if op == "Acosh" and x.min is not None and x.min < 1:
        return [Hint("domain", f"Acosh of values below 1: min of '{x.name}' is {_fmt(x.min)}")]
    if op == "Atanh" and ((x.max or 0) >= 1 or (x.min or 0) <= -1):
        return [Hint("domain", f"Atanh of values outside (-1, 1): '{x.name}' spans [{_fmt(x.min)}, {_fmt(x.max)}]")]
    return []


def _rule_exp(op: str, ins: Sequence[TensorStats], ctx: Context) -> List[Hint]:
    if op not in ("Exp", "Softplus", "Cosh", "Sinh") or not ins:
        return []
    x = ins[0]
    limit = EXP_LIMIT.get(x.dtype)
    if limit is None:
        return []
    top = max(abs(x.max or 0.0), abs(x.min or 0.0)) if op in ("Cosh", "Sinh") else (x.max or 0.0)
    if top > limit:
        return [Hint("exp-overflow", f"{op} overflow: input '{x.name}' reaches {_fmt(top)}, above {limit:.4g} "
                                     f"(exp of it exceeds the {x.dtype} range)")]
    return []


def _rule_inf_arith(op: str, ins: Sequence[TensorStats], ctx: Context) -> List[Hint]:
    infs = [s for s in ins if _has_inf(s)]
    if not infs:
        return []
    zeros = [s for s in ins if s.zeros and s.name != infs[0].name]
    hints = []
    if op in PRODUCTS and zeros:
        hints.append(Hint("zero-times-inf", f"0 * Inf: '{infs[0].name}' holds Inf and '{zeros[0].name}' holds zeros"))
    signs = _inf_signs(ctx, infs)
    if op == "Sub":
        if len(infs) >= 2 and (signs is None or len(signs) == 1):
            hints.append(Hint("inf-minus-inf", f"Inf - Inf: both '{ins[0].name}' and '{ins[1].name}' hold Inf"))
    elif op in PRODUCTS and op in SUMS:
        # products of an Inf with values of both signs are summed: +Inf + -Inf
        others = [s for s in ins if s.name != infs[0].name and s.dtype.startswith("float")]
        mixed = any(s.negatives and (s.max or 0) > 0 for s in others)
        if signs == {1, -1} or mixed:
            hints.append(Hint("inf-minus-inf", f"Inf - Inf: {op} sums products of the Inf in '{infs[0].name}' "
                                               f"with values of both signs"))
    elif op in SUMS and (signs == {1, -1} or (signs is None and len(infs) >= 2)):
        hints.append(Hint("inf-minus-inf", f"Inf - Inf: {op} adds values of opposite infinite sign "
                                           f"({', '.join(repr(s.name) for s in infs)} hold Inf)"))
    return hints


def _inf_signs(ctx: Context, infs: Sequence[TensorStats]) -> Optional[set]:
    values = ctx.get("values", {})
    signs: set = set()
    for s in infs:
        array = values.get(s.name)
        if array is None:
            return None
        signs.update(int(v) for v in np.unique(np.sign(array[np.isinf(array)])))
    return signs


def _rule_norm(op: str, ins: Sequence[TensorStats], ctx: Context) -> List[Hint]:
    if op not in NORMS:
        return []
    epsilon = float(ctx.get("attributes", {}).get("epsilon", 1e-5))
    if epsilon != 0.0:
        return []
    if op == "BatchNormalization" and len(ins) >= 5 and ins[4].zeros:
        return [Hint("zero-variance", f"variance '{ins[4].name}' has {ins[4].zeros} zero(s) and epsilon is 0: "
                                      f"(x - mean) / sqrt(0)")]
    if ins:
        return [Hint("zero-variance", f"epsilon is 0, so a constant slice of '{ins[0].name}' (variance 0) divides by zero")]
    return []


def _rule_range(op: str, ins: Sequence[TensorStats], ctx: Context) -> List[Hint]:
    outs: Sequence[TensorStats] = ctx.get("outputs", [])
    if not outs or not any(o.inf for o in outs) or any(i.nonfinite for i in ins):
        return []
    dtype = outs[0].dtype
    limit = RANGE.get(dtype)
    if limit is None:
        return []
    peak = max((max(abs(s.max or 0.0), abs(s.min or 0.0)) for s in ins if s.dtype.startswith("float")), default=0.0)
    rule = "fp16-overflow" if dtype == "float16" else "overflow"
    return [Hint(rule, f"{dtype} overflow: the result exceeds {limit:.6g} (inputs reach |x| = {_fmt(peak)})")]


def _rule_masked_row(op: str, ins: Sequence[TensorStats], ctx: Context) -> List[Hint]:
    """Softmax of a row that a mask set to -Inf everywhere: exp(-Inf) sums to 0, and 0/0 is NaN."""
    if op != "Softmax" or not ins or not ins[0].inf:
        return []
    value = ctx.get("values", {}).get(ins[0].name)
    if not isinstance(value, np.ndarray) or value.ndim == 0 or value.size == 0:
        return []
    axis = int(ctx["attributes"].get("axis", -1)) % value.ndim
    rows = int(np.count_nonzero(np.isneginf(value).all(axis=axis)))
    if not rows:
        return []
    return [Hint("fully-masked-row", f"{rows} row(s) of '{ins[0].name}' are -Inf at every position (axis {axis}): "
                                     "a mask leaves the query nothing to attend to, and Softmax of such a row is "
                                     "0/0 = NaN (an all-zero attention_mask row? fill with the dtype's lowest "
                                     "value instead of -Inf, or fix the mask)")]


RULES: List[Callable[[str, Sequence[TensorStats], Context], List[Hint]]] = [
    _rule_masked_row, _rule_sources, _rule_division, _rule_domain, _rule_exp, _rule_norm, _rule_inf_arith]
FALLBACK_RULES = [_rule_range]
"""Asked only when no specific rule explains the node (Log of 0 gives -Inf, which is not an overflow)."""


def hints_for(op_type: str, inputs: Sequence[TensorStats], outputs: Sequence[TensorStats],
              attributes: Mapping[str, Any], values: Optional[Mapping[str, Any]] = None) -> List[Hint]:
    """Every rule that explains the node, most specific first; 'unexplained' when none does."""
    ctx: Context = {"outputs": list(outputs), "attributes": dict(attributes), "values": dict(values or {})}
    hints: List[Hint] = []
    for rule in RULES:
        for hint in rule(op_type, inputs, ctx):
            if hint.rule not in {h.rule for h in hints}:
                hints.append(hint)
    for rule in FALLBACK_RULES if not hints else []:
        hints.extend(rule(op_type, inputs, ctx))
    if not hints:
        hints.append(Hint("unexplained", f"{op_type} produced NaN/Inf from finite inputs; no rule matched "
                                         f"(see the input statistics, or replay it with --repro)"))
    return hints
