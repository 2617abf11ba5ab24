"""MI507/MI508: does the input QuantizeLinear cover the range the input really takes (`--input-range`)?

A QuantizeLinear with scale s, zero point zp and type range [qmin, qmax] represents
[s*(qmin-zp), s*(qmax-zp)]; values beyond half a step outside it saturate. Example: s = 1/128,
zp = 0, int8 represents [-1, 0.9922], so [0, 255] pixels lose 99.6% of their range.
"""
from __future__ import annotations

from typing import List, Tuple

import numpy as np

from ..core.graph import NodeInfo
from .config import InputRange
from .context import Context
from .quant import QRANGE, quant_type, type_name

PASS_THROUGH = ("Identity", "Cast", "Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze")
"""Ops that move values without changing them: an input reaches its QuantizeLinear through them."""
WASTE_SHARE = 0.10


def input_quantizers(ctx: Context, tensor: str) -> List[NodeInfo]:
    """QuantizeLinear nodes reading the graph input `tensor`, directly or through value-preserving ops."""
    found: List[NodeInfo] = []
    frontier, seen = [tensor], {tensor}
    while frontier:
        current = frontier.pop()
        for node in ctx.graph.consumers.get(current, []):
            if node.op_type == "QuantizeLinear" and node.inputs and node.inputs[0] == current:
                found.append(node)
            elif node.op_type in PASS_THROUGH and node.inputs and node.inputs[0] == current:
                for out in node.outputs:
                    if out and out not in seen:
                        seen.add(out)
                        frontier.append(out)
    return found


def check_input_ranges(ctx: Context) -> None:
    for declared in ctx.config.input_ranges:
        names = [declared.name] if declared.name else list(ctx.graph.input_names)
        for name in names:
            quantizers = input_quantizers(ctx, name)
            if not quantizers and declared.name:
                ctx.notes.append(f"--input-range {declared.describe()}: no QuantizeLinear reads input '{name}' "
                                 "(directly or through Cast/Transpose/Reshape); nothing to check")
            for q in quantizers:
                _check_one(ctx, name, q, declared)


def coverage(scale: np.ndarray, zp: np.ndarray, qmin: int, qmax: int, low: float, high: float
             ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(representable low, high, share of [low, high] that saturates, share of levels used), per channel."""
    rep_low, rep_high = scale * (qmin - zp), scale * (qmax - zp)
    # Rounding keeps values within half a step of the ends; beyond that they clip.
    edge_low, edge_high = scale * (qmin - zp - 0.5), scale * (qmax - zp + 0.5)
    below = np.clip(np.minimum(edge_low, high) - low, 0, None)
    above = np.clip(high - np.maximum(edge_high, low), 0, None)
    lost = (below + above) / (high - low)
    used = (high - low) / scale / (qmax - qmin + 1)
    return rep_low, rep_high, lost, used


def _check_one(ctx: Context, name: str, q: NodeInfo, declared: InputRange) -> None:
    scale = ctx.const_value(q.inputs[1]) if len(q.inputs) > 1 else None
    if scale is None:
        ctx.notes.append(f"--input-range: QuantizeLinear '{q.name}' on '{name}' has a non-constant scale; not checked")
        return
    qtype = quant_type(ctx, q.name, None, q.inputs[2] if len(q.inputs) > 2 else "")
    if qtype not in QRANGE:
        return
    zp_value = ctx.const_value(q.inputs[2]) if len(q.inputs) > 2 and q.inputs[2] else None
    zp = zp_value.astype(np.float64) if zp_value is not None else np.zeros(1)
    qmin, qmax = QRANGE[qtype]
    s = scale.astype(np.float64).ravel()
    if not (np.isfinite(s).all() and (s > 0).all()):
        return  # MI501/MI502 already report the scale itself
    rep_low, rep_high, lost, used = coverage(s, zp.ravel(), qmin, qmax, declared.low, declared.high)
    worst = int(np.argmax(lost))
    channel = f" (channel {worst})" if s.size > 1 else ""
    params = (f"scale {s[worst]:.6g}, zero point {int(zp.ravel()[min(worst, zp.size - 1)])} ({type_name(qtype)})")
    represented = f"[{rep_low[worst]:.6g}, {rep_high[worst]:.6g}]"
    span = f"[{declared.low:g}, {declared.high:g}]"
    if lost[worst] > 0:
        sides = []
        if declared.low < rep_low[worst]:
            sides.append(f"values below {rep_low[worst]:.4g} saturate at {qmin}")
        if declared.high > rep_high[worst]:
            sides.append(f"values above {rep_high[worst]:.4g} saturate at {qmax}")
        ctx.report("MI507", f"QuantizeLinear '{q.name}' on input '{name}'{channel}: {params} represents "
                            f"{represented}; {lost[worst] * 100:.1f}% of the declared range {span} is lost "
                            f"({'; '.join(sides)})",
                   node=q.name, tensor=name, represented=[float(rep_low[worst]), float(rep_high[worst])],
                   declared=[declared.low, declared.high], lost_share=float(lost[worst]),
                   hint="recalibrate with inputs in the range the model really receives")
        return
    least = int(np.argmin(used))
    if used[least] < WASTE_SHARE:
        ctx.report("MI508", f"QuantizeLinear '{q.name}' on input '{name}': {params} represents "
                            f"{represented}; the declared range {span} spans {used[least] * (qmax - qmin + 1):.1f} "
                            f"of {qmax - qmin + 1} levels ({used[least] * 100:.1f}%)",
                   node=q.name, tensor=name, used_share=float(used[least]))
