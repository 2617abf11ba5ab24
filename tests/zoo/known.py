"""Known open defects of mi that the zoo sweep reproduces (issue 14), as xfails: when a fix makes one pass,
the run shows XPASS, the cue to delete its entry here (and in docs/zoo.md). Keys: (check, model, variant);
model or variant "*" matches any."""
from __future__ import annotations

from typing import Dict, Optional, Tuple

ISOLATION_DYNAMIC = ("isolation skips every layer of a model with a symbolic dimension: 'the shape or type of "
                     "an input of its subgraph is unknown' (symbolic dims are not bound from the samples)")
PROFILE_SYMBOLIC_BATCH = ("profile with synthetic inputs refuses a symbolic batch dimension (exit 3: 'dimension 0 "
                          "(...) is dynamic (fix it with --shape ...)') instead of defaulting it to 1")

DYNAMIC_PAIRING = ("dynamic quantisation: the ConvInteger/MatMulInteger chains pair now (issue 14 part 2), but "
                   "on gpt2like 7 attention tensors are fused away at the default level (47 vs 58 pairs)")

QOPERATOR_PAIRING = ("QOperator models are barely paired: QLinear* outputs are not read back dequantised with "
                     "their own scale and zero point (mobilenetv2: 2 layers vs 65 as QDQ; gpt2like: 27 vs 46; vad: 5 vs 6)")
RENAMED_PAIRING = ("a re-export with renamed nodes is barely paired on attention/recurrent graphs: structural "
                   "pairing stops early (bert: 17 of 72 layers, minilm: 17 of 103, gpt2like: 17 of 54, vad: 1 of 7; resnet pairs all)")

KNOWN: Dict[Tuple[str, str, str], str] = {
    ("pairing", "gpt2like", "dynamic"): DYNAMIC_PAIRING,  # 47 of QDQ's 58 at the default level: fused attention
    ("pairing", "gpt2like", "qop"): QOPERATOR_PAIRING,
    ("pairing", "vad", "qop"): QOPERATOR_PAIRING,
    ("pairing", "bert", "renamed"): RENAMED_PAIRING,
    ("pairing", "gpt2like", "renamed"): RENAMED_PAIRING,
    ("pairing", "vad", "renamed"): RENAMED_PAIRING,
    # full zoo (MI_ZOO=full); only truth and pairing were swept there so far (docs/zoo.md)
    ("pairing", "mobilenetv2", "qop"): QOPERATOR_PAIRING,
    ("pairing", "minilm", "renamed"): RENAMED_PAIRING,
}


def known(check: str, model: str, variant: str) -> Optional[str]:
    """The defect that makes `check` fail on this model and variant, or None."""
    for (c, m, v), reason in KNOWN.items():
        if c == check and m in ("*", model) and v in ("*", variant):
            return reason
    return None
