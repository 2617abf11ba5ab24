"""MI7xx: the model's structure against a reference (`--against fp32.onnx`), plus the weight checks."""
from __future__ import annotations

from ..core.graph import ModelGraph
from ..core.structure import QDQ_OPS, structure_diff
from ..results.validate import AgainstSection
from .context import Context
from .weights import compare_weights

FOLDABLE = {"BatchNormalization": "folded into the preceding Conv's weights", "Dropout": "a no-op at inference",
            "Identity": "a no-op"}
"""Ops an optimiser removes on purpose, and why."""
QDQ_FOLDABLE = {"Relu": "absorbed by the following QuantizeLinear's range",
                "Clip": "absorbed by the following QuantizeLinear's range"}
"""Ops a QDQ quantiser removes on purpose (onnxruntime's drops Relu/Clip before a QuantizeLinear)."""
QOPERATOR_FORMS = {
    "Conv": ("QLinearConv", "ConvInteger"), "MatMul": ("QLinearMatMul", "MatMulInteger"), "Gemm": ("QGemm",),
    "Add": ("QLinearAdd",), "Mul": ("QLinearMul",), "GlobalAveragePool": ("QLinearGlobalAveragePool",),
    "AveragePool": ("QLinearAveragePool",), "Sigmoid": ("QLinearSigmoid",), "LeakyRelu": ("QLinearLeakyRelu",),
    "Softmax": ("QLinearSoftmax",), "Concat": ("QLinearConcat",),
}
"""Float op -> the QOperator-format ops that replace it (com.microsoft ones are shown as 'com.microsoft:Op')."""


def check_against(ctx: Context, other: ModelGraph) -> AgainstSection:
    """Structural findings (the --against model is the reference) and the section for the report."""
    diff = structure_diff(other, ctx.graph)
    ref_name, mine = other.display_name, ctx.graph.display_name
    foldable = dict(FOLDABLE, **(QDQ_FOLDABLE if diff.qdq_pairs[1] or diff.quantized_ops[1] else {}))
    replacements = set()
    for op in diff.only_a:
        count = diff.op_counts[op][0]
        forms = [f for q in QOPERATOR_FORMS.get(op, ()) for f in (q, f"com.microsoft:{q}")
                 if diff.op_counts.get(f, (0, 0))[1]]
        if forms:
            replacements.update(forms)
            shown = ", ".join(f"{f} ({diff.op_counts[f][1]}x)" for f in forms)
            ctx.report("MI706", f"{op} ({count}x in the reference) is absent: replaced by {shown}, its quantised "
                                "(QOperator) form", op_type=op, count=count)
        elif op in foldable:
            ctx.report("MI706", f"{op} ({count}x in the reference) is absent: {foldable[op]}", op_type=op, count=count)
        else:
            ctx.report("MI701", f"{op} ({count}x in {ref_name}) is absent from {mine}", op_type=op, count=count)
    for op in diff.only_b:
        if op not in replacements:
            ctx.report("MI702", f"{op} ({diff.op_counts[op][1]}x) is not in the reference {ref_name}", op_type=op,
                       count=diff.op_counts[op][1])
    for op, (a, b) in diff.op_counts.items():
        if a and b and a != b and op not in QDQ_OPS:
            ctx.report("MI705", f"{op}: {a} in the reference, {b} here", op_type=op, reference=a, model=b)
    for sig in diff.signature:
        if sig.a == "-" or sig.b == "-":
            where = f"is missing from {mine}" if sig.b == "-" else f"is not in the reference {ref_name}"
            ctx.report("MI703", f"{sig.kind} '{sig.name}' {where}", tensor=sig.name, kind=sig.kind)
        else:
            ctx.report("MI704", f"{sig.kind} '{sig.name}' is {sig.b} here but {sig.a} in the reference",
                       tensor=sig.name, kind=sig.kind, reference=sig.a, model=sig.b)
    weights = compare_weights(ctx, other) if ctx.weights_readable else []
    return AgainstSection(
        model=ref_name,
        op_counts={op: [a, b] for op, (a, b) in diff.op_counts.items()},
        only_reference=list(diff.only_a), only_model=list(diff.only_b),
        signature=[{"kind": s.kind, "name": s.name, "reference": s.a, "model": s.b} for s in diff.signature],
        nodes=list(diff.nodes), qdq_pairs=list(diff.qdq_pairs), quantized_ops=list(diff.quantized_ops),
        initializer_bytes=list(diff.initializer_bytes), weights=weights,
    )
