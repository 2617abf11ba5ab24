"""Known open defects of mi that the zoo sweep reproduces (issue 14), as xfails: when a fix makes one pass,
the run shows XPASS, the cue to delete its entry here (and in docs/zoo.md). Keys: (check, model, variant);
model or variant "*" matches any."""
from __future__ import annotations

from typing import Dict, Optional, Tuple

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


def known(check: str, model: str, variant: str) -> Optional[str]:
    """The defect that makes `check` fail on this model and variant, or None."""
    for (c, m, v), reason in KNOWN.items():
        if c == check and m in ("*", model) and v in ("*", variant):
            return reason
    return None
