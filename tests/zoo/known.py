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

ISOLATION_INT4 = ("isolation skips layers fed by MatMulNBits' packed uint8 weights on swin int4: 75% of 236 "
                  "isolated ('the type of an input of its subgraph is unknown (or integer without a quantisation)')")

KNOWN: Dict[Tuple[str, str, str], str] = {
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
}


def known(check: str, model: str, variant: str) -> Optional[str]:
    """The defect that makes `check` fail on this model and variant, or None."""
    for (c, m, v), reason in KNOWN.items():
        if c == check and m in ("*", model) and v in ("*", variant):
            return reason
    return None
