"""An independent greedy decoder in plain onnxruntime (nothing of mi): present.N.* fed back to
past_key_values.N.*, attention_mask ones over past + new, position_ids past .. past + new - 1. The
sweep's truth for `mi compare --decode`: tokens free-running, last-position logits teacher-forced."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np


@dataclass
class Decoded:
    """The tokens chosen at each step and each step's last-position logits (float64)."""

    tokens: List[int] = field(default_factory=list)
    logits: List[np.ndarray] = field(default_factory=list)


class Greedy:
    """One decoder session (opened once: the same session decodes every prompt)."""

    def __init__(self, path: Path) -> None:
        import onnxruntime as ort
        self.path = Path(path)
        self.session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        self.inputs = {i.name: i for i in self.session.get_inputs()}
        self.outputs = [o.name for o in self.session.get_outputs()]
        self.float = np.float16 if any(i.type == "tensor(float16)" for i in self.inputs.values()) else np.float32

    def empty_cache(self) -> dict:
        cache = {}
        for name, info in self.inputs.items():
            if name.startswith("past_key_values."):
                # [batch, kv heads, past, head size]: batch 1, past 0; onnxruntime-genai's builder names the
                # head size `kv_cache_dim`, its genai_config.json beside the model gives it
                head = info.shape[3] if isinstance(info.shape[3], int) else self.genai_head_size()
                cache[name] = np.zeros((1, info.shape[1], 0, head), self.float)
        return cache

    def genai_head_size(self) -> int:
        import json
        config = json.loads((self.path.parent / "genai_config.json").read_text())
        return int(config["model"]["decoder"]["head_size"])

    def run(self, prompt: Sequence[int], steps: int, forced: Optional[Sequence[int]] = None) -> Decoded:
        """Greedy decode `steps` steps from `prompt`; with `forced`, step k + 1 is fed forced[k] instead
        of this model's own token k (teacher forcing)."""
        out, cache, fed, past = Decoded(), self.empty_cache(), list(prompt), 0
        for step in range(steps):
            feed = {"input_ids": np.array([fed], np.int64), **cache}
            if "attention_mask" in self.inputs:
                feed["attention_mask"] = np.ones((1, past + len(fed)), np.int64)
            if "position_ids" in self.inputs:
                feed["position_ids"] = np.arange(past, past + len(fed), dtype=np.int64)[None]
            result = dict(zip(self.outputs, self.session.run(None, feed)))
            past += len(fed)
            cache = {name: result[name.replace("past_key_values.", "present.")] for name in cache}
            last = result["logits"][0, -1].astype(np.float64)
            out.logits.append(last)
            out.tokens.append(int(np.argmax(last)))
            fed = [forced[step] if forced is not None else out.tokens[-1]]
        return out


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine of two finite vectors in float64."""
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))
