"""Known open defects of mi that the zoo sweep reproduces (issue 14), as xfails: when a fix makes one pass,
the run shows XPASS, the cue to delete its entry here (and in docs/zoo.md). Keys: (check, model, variant);
model or variant "*" matches any. SATURATING_KERNELS: checks that cannot hold on CPUs whose onnxruntime int8
kernels saturate (not mi's defects), strict xfails there only."""
from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

from inspector_cli.core.fingerprint import u8s8_saturates

KNOWN: Dict[Tuple[str, str, str], str] = {
    # full zoo (MI_ZOO=full), every check, 2026-12-01 (docs/zoo.md): none open
    # issue 29: the fallback plan at the halfway target, measured as quantize_static builds the exclude list
    # (remedy/exclusion.py; 2026-12-04, docs/zoo.md "Features"). Not found within the default budget
    # (--max-nodes 10 candidates, --max-runs 50) where the error is spread; each is found with
    # --max-nodes 30 --max-runs 150 except MobileNetV2's
    ("fallback", "*", "fp16"): "fp16 block list not found at the halfway target (1 - cosine ~1e-7 "
        "-> 5e-8): fp16 rounding is spread over every Conv/MatMul (blocking a node keeps its input's rounding), "
        "onnxconverter_common refuses blocks of shared weights, and vad's Conv inside its If cannot be blocked",
    ("fallback", "*", "fp16_io"): "fp16 block list not found at the halfway target: as fp16",
    ("fallback", "mobilenetv2", "qdq_s8s8_pc"): "fallback plan not found: symmetric int8 activations cost every "
        "ReLU6 output a bit; the best 10 candidates reach 0.9758 of 0.9867 (baseline 0.9733), 55 nodes with "
        "--max-runs 150 reach 0.9832",
    ("fallback", "minilm", "qdq_u8u8"): "fallback plan not found: the error is spread over the 3 layers (best "
        "0.999753 of 0.999815, baseline 0.999630); --max-nodes 30 --max-runs 150: 29 nodes",
    ("fallback", "minilm", "qdq_s8s8_pc"): "fallback plan not found: as qdq_u8u8 (--max-nodes 30 --max-runs 150: "
        "22 nodes)",
    # issue 44: mi fix's fp16 block lists are the fallback plan's (the same engine)
    ("fix", "*", "fp16"): "fp16 block list not found at the halfway target: as the fallback plan's",
    ("fix", "*", "fp16_io"): "fp16 block list not found at the halfway target: as the fallback plan's",
    # non-tensor members (issue 29), 2026-12-02
    ("isolation", "seqlist", "*"): "isolation feeds and measures tensors only: the sequence tensors "
    "(SplitToSequence's, the Loop's list) and ConcatFromSequence, which reads one, are skipped with that "
    "reason (3 of 5 paired layers)",
    ("isolation", "sklearn_zipmap", "*"): "isolation measures tensors only: ZipMap's seq(map) output is "
    "skipped with that reason (1 of 3 paired layers)",
}


SATURATING_KERNELS: Dict[Tuple[str, str, str], str] = {
    # Not defects of mi: checks whose independent truth is onnxruntime's QDQ arithmetic (optimisations off),
    # which the deployed int8 kernels do not compute on x86 CPUs with AVX2 (or AVX-512) and no VNNI: there
    # they add pairs of uint8 x int8 products in a saturating int16 (core/fingerprint.u8s8_saturates). Strict
    # xfails on those CPUs only; on others the check must pass. Measured 2026-12-06, AMD EPYC (Zen 3), ort 1.32
    ("fused", "gpt2like", "qdq_s8s8_pc"): "onnxruntime runs its MatMuls as u8s8 QLinearMatMul (x86 shifts int8 "
        "activations to uint8), which saturate on this CPU: c_attn's output, read where it is materialised, is "
        "cosine 0.9942 deployed but 0.9998 in QDQ arithmetic (--simulated: MI866), so the Split/Transpose tensors "
        "mi recomputes from it read 0.9933-0.9956 where the recomputation's QDQ arithmetic gives 0.9994-0.9998",
    ("fallback", "gpt2like", "qdq_s8s8_pc"): "the saturating u8s8 MatMuls are the whole int8 error here: deployed "
        "cosine 0.99492, 0.99914 in QDQ arithmetic (optimisations off), so the halfway target 0.99746 needs every "
        "MatMul out of int8; --fallback-plan's float exclusion reaches 0.99658 with 27 nodes (0.99703 with 50 at "
        "--max-nodes 30 --max-runs 150), mi fix meets it with 6 tensors at 16 bits and no float node (0.99902). "
        "Passed at stop 48 on a CPU whose kernels do not saturate; measured 2026-12-06 (AVX2, no VNNI)",
}


def saturating(check: str, model: str, variant: str, cpu_flags: Sequence[str]) -> Optional[str]:
    """Why `check` cannot hold on this CPU's int8 kernels for this model and variant, or None."""
    if not u8s8_saturates(cpu_flags):
        return None
    return SATURATING_KERNELS.get((check, model, variant))


def known(check: str, model: str, variant: str) -> Optional[str]:
    """The defect that makes `check` fail on this model and variant, or None."""
    for (c, m, v), reason in KNOWN.items():
        if c == check and m in ("*", model) and v in ("*", variant):
            return reason
    return None
