"""KV-cache decoders exported with optimum's exporter (issue 30): GPT-2 (multi-head attention, learned
positions) and Llama (grouped-query attention, rotary), built from their config classes with random
init, `past_key_values.N.key/value` in, `present.N.*` out; their prompts, samples and NaN copies.

optimum pins other versions than the dev extra, so the export runs in its own venv through a
subprocess: `MI_ZOO_OPTIMUM_PYTHON=/path/to/python` (or `scripts/zoo.py --optimum-python`), else the
current interpreter when optimum imports in it; without either the member is recorded as unavailable
in its manifest and the sweep skips it with that reason.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

from . import samples as S

Sample = Dict[str, np.ndarray]
OPTIMUM_ENV = "MI_ZOO_OPTIMUM_PYTHON"
NAN_VARIANTS = ("nan_weight", "nan_late")
DECODER_VARIANTS = ("dynamic", "int4", "fp16") + NAN_VARIANTS
PROMPT_LEN = 8
"""Every prompt is the first 8 tokens of a zoo sentence: the step a position is first used is then the
same for every prompt (step 0 feeds positions 0-7, step k position 7 + k)."""
LATE_STEP = 4
"""The decode step at which nan_late's NaN is first read."""
SEQ = 16  # the plain samples (per-model commands): 16 tokens, right-padded, empty past


class Unavailable(Exception):
    """The member cannot be built here (no optimum): recorded in the manifest, not an error."""


def optimum_python() -> Optional[str]:
    """The interpreter to export with: $MI_ZOO_OPTIMUM_PYTHON, else this one when optimum imports here."""
    given = os.environ.get(OPTIMUM_ENV)
    if given:
        return given
    if importlib.util.find_spec("optimum") and importlib.util.find_spec("optimum.exporters.onnx"):
        return sys.executable
    return None


def prompts(count: int, vocab: int, offset: int = 0) -> List[List[int]]:
    """The decode prompts: the zoo's sentences as token ids (S.tokens), the first PROMPT_LEN of each."""
    return [[int(t) for t in s["input_ids"][0][:PROMPT_LEN]] for s in S.tokens(count, PROMPT_LEN, vocab, offset)]


def plain_inputs(layers: int, kv_heads: int, head_dim: int, vocab: int):
    """Samples for the per-model commands: a right-padded prompt (input_ids, attention_mask,
    position_ids) with empty caches (past length 0), the first step of a generation."""
    def make(count: int, offset: int) -> List[Sample]:
        out = []
        for s in S.tokens(count, SEQ, vocab, offset):
            sample = {"input_ids": s["input_ids"], "attention_mask": s["attention_mask"],
                      "position_ids": np.arange(SEQ, dtype=np.int64)[None]}
            for i in range(layers):
                for kv in ("key", "value"):
                    sample[f"past_key_values.{i}.{kv}"] = np.zeros((1, kv_heads, 0, head_dim), np.float32)
            out.append(sample)
        return out
    return make


def export(recipe: Dict[str, object], path: Path, sample: Sample) -> Dict[str, object]:
    """Export the recipe's model to `path` with optimum (in its venv); the manifest's facts."""
    python = optimum_python()
    if python is None:
        raise Unavailable(f"optimum is not installed here; set {OPTIMUM_ENV} to a python with optimum-onnx "
                          "(docs/zoo.md, 'KV-cache decoders')")
    with tempfile.TemporaryDirectory(prefix="mi-zoo-sample-") as tmp:
        np.savez(Path(tmp) / "sample.npz", **sample)
        config = json.dumps({"config": recipe["config"], "kwargs": recipe["kwargs"], "opset": recipe.get("opset")})
        script = Path(__file__).with_name("optimum_export.py")
        proc = subprocess.run([python, str(script), str(recipe["arch"]), config, str(path), str(Path(tmp) / "sample.npz")],
                              capture_output=True, text=True, env={**os.environ, "TRANSFORMERS_VERBOSITY": "error"})
    if proc.returncode != 0:
        raise RuntimeError(f"optimum export failed ({python}): {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def greedy(path: Path, prompt: Sequence[int], steps: int, dims: Optional[Dict[str, int]] = None) -> List[int]:
    """Greedy tokens of one decoder in plain onnxruntime (present fed to past); for placing nan_late.
    `dims`: sizes of the empty past's symbolic dims other than batch and past length (the builder's
    `kv_cache_dim`)."""
    import onnxruntime as ort
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    outputs = [o.name for o in session.get_outputs()]
    dims = dims or {}
    past = {i.name: np.zeros([1 if isinstance(d, str) and "batch" in d else (dims.get(d, 0) if isinstance(d, str) else d)
                              for d in i.shape], np.float32) for i in session.get_inputs() if i.name.startswith("past")}
    tokens, feed_ids, done = [], list(prompt), 0
    for _ in range(steps):
        feed = {"input_ids": np.array([feed_ids], np.int64), **past}
        if "attention_mask" in names:
            feed["attention_mask"] = np.ones((1, done + len(feed_ids)), np.int64)
        if "position_ids" in names:
            feed["position_ids"] = np.arange(done, done + len(feed_ids), dtype=np.int64)[None]
        result = dict(zip(outputs, session.run(None, feed)))
        done += len(feed_ids)
        past = {k: result[k.replace("past_key_values", "present")] for k in past}
        tokens.append(int(np.argmax(result["logits"][0, -1])))
        feed_ids = [tokens[-1]]
    return tokens


def save_steps(fp32: Path, prompt: Sequence[int], folder: Path, steps: int = 16,
               dims: Optional[Dict[str, int]] = None) -> None:
    """Per-step inputs for `--sequence` (step_NNNN.npz: input_ids, attention_mask, position_ids; the
    caches are the wired state): the prompt, then the tokens fp32 generates from it, one a step."""
    tokens = greedy(fp32, prompt, steps, dims)
    names = {i.name for i in __import__("onnx").load(str(fp32), load_external_data=False).graph.input}
    folder.mkdir(parents=True, exist_ok=True)
    fed, past = list(prompt), 0
    for k in range(steps):
        arrays = {"input_ids": np.array([fed], np.int64), "attention_mask": np.ones((1, past + len(fed)), np.int64),
                  "position_ids": np.arange(past, past + len(fed), dtype=np.int64)[None]}
        np.savez(folder / f"step_{k:04d}.npz", **{n: v for n, v in arrays.items() if n in names})
        past += len(fed)
        fed = [tokens[k]]


def _consumer(graph, initializer: str) -> str:
    return next(n.name for n in graph.node if initializer in n.input)


def make_nan(variant: str, recipe: Dict[str, object], fp32: Path, out: Path, prompt: Sequence[int]) -> Dict[str, object]:
    """A copy of the fp32 decoder with one NaN weight; returns where it enters (for the manifest and the
    sweep's checks): the initializer, its consumer node (the true origin) and the first decode step
    (of `prompt`) whose outputs are non-finite.

    nan_weight: element [0, 0] of the lm_head MatMul's weight: logits column 0 is NaN from step 0.
    nan_late:   one element of a table row first read at decode step LATE_STEP: GPT-2's position
                embedding row PROMPT_LEN + LATE_STEP - 1; for Llama (rotary positions are computed,
                not a table) the token-embedding row of the first token fp32 generates at step
                LATE_STEP - 1 or later that neither the prompt nor an earlier step holds."""
    import onnx
    from onnx import numpy_helper
    model = onnx.load(str(fp32))
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    producer = {o: n for n in graph.node for o in n.output}
    if variant == "nan_weight":
        name = next(x for x in producer["logits"].input if x in inits)
        row, step = 0, 0
    else:
        name = str(recipe["late_table"])
        if recipe["late_kind"] == "position":
            row, step = PROMPT_LEN + LATE_STEP - 1, LATE_STEP
        else:
            generated = greedy(fp32, prompt, LATE_STEP + 12)
            j = next(j for j in range(LATE_STEP - 1, len(generated))
                     if generated[j] not in set(prompt) | set(generated[:j]))
            row, step = generated[j], j + 1  # the token generated at step j is fed at step j + 1
    weight = numpy_helper.to_array(inits[name]).copy()
    weight[row, 0] = np.nan
    inits[name].CopyFrom(numpy_helper.from_array(weight, name))
    onnx.save(model, str(out))
    return {"tool": f"one NaN at {name}[{row}, 0]", "initializer": name, "origin": _consumer(graph, name),
            "first_nonfinite_step": step}


def _gpt2() -> Dict[str, object]:
    return {"arch": "GPT2LMHeadModel", "config": "GPT2Config", "opset": 18, "late_kind": "position",
            "late_table": "transformer.wpe.weight",
            "kwargs": {"n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 1000, "n_positions": 128,
                       "bos_token_id": 1, "eos_token_id": 2}}


def _llama() -> Dict[str, object]:
    return {"arch": "LlamaForCausalLM", "config": "LlamaConfig", "opset": 18, "late_kind": "token",
            "late_table": "model.embed_tokens.weight",
            "kwargs": {"vocab_size": 1000, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                       "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128,
                       "bos_token_id": 1, "eos_token_id": 2}}


RECIPES = {"gpt2_optimum": (_gpt2(), 4), "llama_optimum": (_llama(), 2)}
"""member name -> (recipe, key/value heads); both have 2 layers of head size 16."""
