"""Known open defects of mi that the zoo sweep reproduces (issue 14), as xfails: when a fix makes one pass,
the run shows XPASS, the cue to delete its entry here (and in docs/zoo.md). Keys: (check, model, variant);
model or variant "*" matches any."""
from __future__ import annotations

from typing import Dict, Optional, Tuple

DEPLOYED_FUSED = ("paired, but not read at the default level: onnxruntime fuses the tensor away in the deployed "
                  "graph (Gelu's Div/Erf+Add, SkipLayerNormalization's residual Add, SiLU's Sigmoid, MatMul+Add "
                  "into attention kernels) and deployed capture reports it 'not materialised' (--capture "
                  "instrumented or --opt-level disable reads it); QDQ keeps these tensors as QuantizeLinear outputs")

KNOWN: Dict[Tuple[str, str, str], str] = {
    # full zoo (MI_ZOO=full), every check, 2026-12-01 (docs/zoo.md)
    ("pairing", "segformer", "qop"): DEPLOYED_FUSED,  # 117 of QDQ's 144 read (all 144 paired)
    **{("pairing", m, "dynamic"): DEPLOYED_FUSED for m in ("efficientnet", "vit", "whisper_enc")},  # 79/102, 41/47, 41/50
}


def known(check: str, model: str, variant: str) -> Optional[str]:
    """The defect that makes `check` fail on this model and variant, or None."""
    for (c, m, v), reason in KNOWN.items():
        if c == check and m in ("*", model) and v in ("*", variant):
            return reason
    return None
