"""Known open defects of mi that the zoo sweep reproduces (issue 14), as xfails: when a fix makes one pass,
the run shows XPASS, the cue to delete its entry here (and in docs/zoo.md). Keys: (check, model, variant);
model or variant "*" matches any."""
from __future__ import annotations

from typing import Dict, Optional, Tuple

ISOLATION_DYNAMIC = ("isolation skips every layer of a model with a symbolic dimension: 'the shape or type of "
                     "an input of its subgraph is unknown' (symbolic dims are not bound from the samples)")
PROFILE_SYMBOLIC_BATCH = ("profile with synthetic inputs refuses a symbolic batch dimension (exit 3: 'dimension 0 "
                          "(...) is dynamic (fix it with --shape ...)') instead of defaulting it to 1")

DYNAMIC_PAIRING = ("dynamic quantisation pairs fewer layers than QDQ on some models (full zoo, 2026-12-01): "
                   "efficientnet 79 vs 102, vit 41 vs 47, whisper_enc 41 vs 50")

QOPERATOR_PAIRING = ("QOperator models pair fewer layers than QDQ: QLinear* outputs are not all read back "
                     "dequantised with their own scale and zero point (full zoo 2026-12-01: mobilenetv2, gpt2like, "
                     "vad, regnet 43 vs 48, segformer 117 vs 144)")
RENAMED_PAIRING = ("a re-export with renamed nodes is barely paired on attention/recurrent graphs: structural "
                   "pairing stops early (bert: 17 of 72 layers, minilm: 17 of 103, gpt2like: 17 of 54, vad: 1 of 7; resnet pairs all)")

LAYER_PRECISION = ("layer metrics lose precision where the numbers are tiny or cancel: on random-init MobileNetV2/"
                   "EfficientNet (activations ~1e-25) mi reports cosine 1.000000 where the recomputation gives "
                   "0.9966-0.998 (and 1.0 vs 0.0 when fp16 underflows to zero); LayerNorm ReduceMean (true cosine "
                   "~0.01) differs by 4e-3; the output comparison of the same run is right (float64)")
SWIN_LAYOUT = ("deployed capture reads a tensor in another layout: swin fp16 '/model/swin/embeddings/norm/"
               "Sub_output_0' has shape_b [1, 32, 3136] vs shape_a [1, 3136, 32] in onnxruntime's optimised graph "
               "(the Transpose moved past the LayerNorm Sub) and is compared element-wise: cosine 0.0004, true 1.0")

ISOLATION_INT4 = ("isolation skips layers fed by MatMulNBits' packed uint8 weights on swin int4: 75% of 236 "
                  "isolated ('the type of an input of its subgraph is unknown (or integer without a quantisation)')")

ISOLATION_UNTYPED = ("isolation skips a layer whose subgraph input has no known type: the ai.onnx.ml ops of a "
                     "skl2onnx pipeline (sklearn: 40-50% of layers isolated) and 3 of gpt2like's 17 layers paired "
                     "on its renamed re-export ('the type of an input of its subgraph is unknown')")

KNOWN: Dict[Tuple[str, str, str], str] = {
    ("isolation", "sklearn", "*"): ISOLATION_UNTYPED,
    ("isolation", "gpt2like", "renamed"): ISOLATION_UNTYPED,
    ("pairing", "gpt2like", "qop"): QOPERATOR_PAIRING,
    ("pairing", "vad", "qop"): QOPERATOR_PAIRING,
    ("pairing", "bert", "renamed"): RENAMED_PAIRING,
    ("pairing", "gpt2like", "renamed"): RENAMED_PAIRING,
    ("pairing", "vad", "renamed"): RENAMED_PAIRING,
    # full zoo (MI_ZOO=full), every check, 2026-12-01 (docs/zoo.md)
    ("isolation", "swin", "int4"): ISOLATION_INT4,
    ("pairing", "mobilenetv2", "qop"): QOPERATOR_PAIRING,
    ("pairing", "regnet", "qop"): QOPERATOR_PAIRING,
    ("pairing", "segformer", "qop"): QOPERATOR_PAIRING,
    **{("pairing", m, "dynamic"): DYNAMIC_PAIRING for m in ("efficientnet", "vit", "whisper_enc")},
    ("pairing", "minilm", "renamed"): RENAMED_PAIRING,
    **{("truth", "mobilenetv2", v): LAYER_PRECISION for v in ("qdq_u8u8", "qdq_s8s8_pc", "qop", "dynamic", "fp16",
                                                              "fp16_io")},
    **{("truth", "convnext", v): LAYER_PRECISION for v in ("fp16", "fp16_io")},  # fp16 underflow: 1.0 vs 0.0
    **{("truth", "swin", v): SWIN_LAYOUT for v in ("fp16", "fp16_io")},
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
