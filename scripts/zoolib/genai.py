"""KV-cache decoders exported by onnxruntime-genai's model builder (issue 41): tiny Llama, Qwen2 and
Phi3 (2 layers, 4 query / 2 key-value heads: GroupQueryAttention with the rotary embedding inside,
SkipSimplifiedLayerNormalization, MatMulNBits for int4/int8), built from their config classes with
random init, exported as users export them for phones and PCs:

    python -m onnxruntime_genai.models.builder -i HF_FOLDER -o OUT -p fp32|int4|int8 -e cpu

Each precision is the builder's own folder, as onnxruntime-genai loads it: `<member>/<precision>/`
with model.onnx, model.onnx.data, genai_config.json and the tokenizer files (the sweep's path for a
variant is `<member>/<variant>/model.onnx` when that exists). The past's head dimension is the
symbol `kv_cache_dim` and the mask feeds GroupQueryAttention's seqlens_k / total_sequence_length.

The builder and its runtime need their own venv (a newer transformers than the dev extra, and
onnxruntime-genai): `MI_ZOO_GENAI_PYTHON=/path/to/python` (or `scripts/zoo.py --genai-python`),
else the current interpreter when onnxruntime_genai imports in it; without either the member is
recorded as unavailable in its manifest and the sweep skips it with that reason. The export script
also records onnxruntime-genai's own greedy Generator's tokens on the prompts (the decode truth).
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

from . import decoders as D
from . import samples as S

GENAI_ENV = "MI_ZOO_GENAI_PYTHON"
PRECISIONS = ("int4", "int8")
"""The variants: the builder's own quantised exports (MatMulNBits, 4 and 8 bits, block 32)."""
HEAD = 16
KV_HEADS = 2
LAYERS = 2
VOCAB = 1000
_COMMON = {"vocab_size": VOCAB, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": LAYERS,
           "num_attention_heads": 4, "num_key_value_heads": KV_HEADS, "max_position_embeddings": 128,
           "bos_token_id": 1, "eos_token_id": 2}
RECIPES: Dict[str, Dict[str, object]] = {
    "llama_genai": {"arch": "LlamaForCausalLM", "config": "LlamaConfig", "kwargs": dict(_COMMON)},
    "qwen2_genai": {"arch": "Qwen2ForCausalLM", "config": "Qwen2Config", "kwargs": dict(_COMMON)},
    # Phi3's default pad id (32000) is outside a 1000-token vocabulary
    "phi3_genai": {"arch": "Phi3ForCausalLM", "config": "Phi3Config",
                   "kwargs": {**_COMMON, "pad_token_id": 0, "original_max_position_embeddings": 128}},
}


class Unavailable(D.Unavailable):
    """No onnxruntime-genai here: recorded in the manifest, not an error."""


def genai_python() -> Optional[str]:
    """The interpreter to export with: $MI_ZOO_GENAI_PYTHON, else this one when onnxruntime_genai imports here."""
    given = os.environ.get(GENAI_ENV)
    if given:
        return given
    if importlib.util.find_spec("onnxruntime_genai"):
        return sys.executable
    return None


def plain_inputs(count: int, offset: int) -> List[Dict[str, np.ndarray]]:
    """Samples for the per-model commands: a right-padded 16-token prompt (input_ids, attention_mask;
    the builder's graph has no position_ids: GroupQueryAttention derives them from the mask) with empty
    caches (past length 0), the first step of a generation."""
    out = []
    for s in S.tokens(count, D.SEQ, VOCAB, offset):
        sample = {"input_ids": s["input_ids"], "attention_mask": s["attention_mask"]}
        for i in range(LAYERS):
            for kv in ("key", "value"):
                sample[f"past_key_values.{i}.{kv}"] = np.zeros((1, KV_HEADS, 0, HEAD), np.float32)
        out.append(sample)
    return out


def build(name: str, folder: Path, sample: Dict[str, np.ndarray], prompts: List[List[int]],
          steps: int) -> Dict[str, object]:
    """Export fp32 and the PRECISIONS into `folder/<precision>/` with the builder (in its venv); returns
    the manifest's facts: exporter and versions, per precision the builder's outcome, the torch error
    and the Generator's tokens (free-running and teacher-forced on fp32's)."""
    python = genai_python()
    if python is None:
        raise Unavailable(f"onnxruntime-genai is not installed here; set {GENAI_ENV} to a python with "
                          "onnxruntime-genai and its builder's needs (docs/zoo.md, 'onnxruntime-genai builder')")
    recipe = RECIPES[name]
    with tempfile.TemporaryDirectory(prefix="mi-zoo-genai-sample-") as tmp:
        np.savez(Path(tmp) / "sample.npz", **sample)
        (Path(tmp) / "prompts.json").write_text(json.dumps(prompts))
        script = Path(__file__).with_name("genai_export.py")
        config = json.dumps({"config": recipe["config"], "kwargs": recipe["kwargs"]})
        proc = subprocess.run([python, str(script), str(recipe["arch"]), config, str(folder),
                               ",".join(("fp32",) + PRECISIONS), str(Path(tmp) / "prompts.json"), str(steps),
                               str(Path(tmp) / "sample.npz")],
                              capture_output=True, text=True, cwd=tmp,
                              env={**os.environ, "TRANSFORMERS_VERBOSITY": "error"})
    if proc.returncode != 0:
        raise RuntimeError(f"onnxruntime-genai export failed ({python}): {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def save_steps(folder: Path, prompt: List[int], steps: int) -> None:
    """`--sequence` step inputs from the fp32 export (prompt, then its own greedy tokens): input_ids and
    attention_mask per step (decoders.save_steps with the past's head dimension named)."""
    D.save_steps(folder / "fp32" / "model.onnx", prompt, folder / "steps", steps, dims={"kv_cache_dim": HEAD})
