"""Known open defects of mi that the zoo sweep reproduces (issue 14), as xfails: when a fix makes one pass,
the run shows XPASS, the cue to delete its entry here (and in docs/zoo.md). Keys: (check, model, variant);
model or variant "*" matches any."""
from __future__ import annotations

from typing import Dict, Optional, Tuple

ISOLATION_DYNAMIC = ("isolation skips every layer of a model with a symbolic dimension: 'the shape or type of "
                     "an input of its subgraph is unknown' (symbolic dims are not bound from the samples)")
PROFILE_SYMBOLIC_BATCH = ("profile with synthetic inputs refuses a symbolic batch dimension (exit 3: 'dimension 0 "
                          "(...) is dynamic (fix it with --shape ...)') instead of defaulting it to 1")

DEPLOYED_FUSED = ("paired, but not read at the default level: onnxruntime fuses the tensor away in the deployed "
                  "graph (Gelu's Div/Erf+Add, SkipLayerNormalization's residual Add, SiLU's Sigmoid, MatMul+Add "
                  "into attention kernels) and deployed capture reports it 'not materialised' (--capture "
                  "instrumented or --opt-level disable reads it); QDQ keeps these tensors as QuantizeLinear outputs")

LAYER_PRECISION = ("layer metrics lose precision where the numbers are tiny or cancel: on random-init MobileNetV2/"
                   "EfficientNet (activations ~1e-25) mi reports cosine 1.000000 where the recomputation gives "
                   "0.9966-0.998 (and 1.0 vs 0.0 when fp16 underflows to zero); LayerNorm ReduceMean (true cosine "
                   "~0.01) differs by 4e-3; the output comparison of the same run is right (float64)")
SWIN_LAYOUT = ("deployed capture reads a tensor in another layout: swin fp16 '/model/swin/embeddings/norm/"
               "Sub_output_0' has shape_b [1, 32, 3136] vs shape_a [1, 3136, 32] in onnxruntime's optimised graph "
               "(the Transpose moved past the LayerNorm Sub) and is compared element-wise: cosine 0.0004, true 1.0")

ISOLATION_UNTYPED = ("isolation skips a layer whose subgraph input has no known type: the ai.onnx.ml ops of a "
                     "skl2onnx pipeline (sklearn: 40-50% of layers isolated; 'the type of an input of its subgraph "
                     "is unknown')")

KNOWN: Dict[Tuple[str, str, str], str] = {
    ("isolation", "sklearn", "*"): ISOLATION_UNTYPED,
    # full zoo (MI_ZOO=full); only truth and pairing were swept there so far (docs/zoo.md)
    ("pairing", "efficientnet", "dynamic"): DEPLOYED_FUSED,  # 79 of QDQ's 102 (22 Sigmoid of SiLU)
    ("pairing", "vit", "dynamic"): DEPLOYED_FUSED,  # 41 of 47
    ("pairing", "whisper_enc", "dynamic"): DEPLOYED_FUSED,  # 41 of 50
    ("pairing", "segformer", "qop"): DEPLOYED_FUSED,  # 117 of 144
    **{("truth", "mobilenetv2", v): LAYER_PRECISION for v in ("qdq_u8u8", "qdq_s8s8_pc", "qop", "fp16", "fp16_io")},
    **{("truth", "efficientnet", v): LAYER_PRECISION for v in ("qdq_u8u8", "qdq_s8s8_pc", "dynamic", "fp16",
                                                               "fp16_io")},
    ("truth", "swin", "qdq_u8u8"): LAYER_PRECISION,
    ("truth", "swin", "qdq_s8s8_pc"): LAYER_PRECISION,
}


def known(check: str, model: str, variant: str) -> Optional[str]:
    """The defect that makes `check` fail on this model and variant, or None."""
    for (c, m, v), reason in KNOWN.items():
        if c == check and m in ("*", model) and v in ("*", variant):
            return reason
    return None
