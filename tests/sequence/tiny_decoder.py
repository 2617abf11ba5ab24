"""A hand-built decoder with a KV-style cache, small enough to reason about by hand.

logits[0, i] = E[input_ids[i]] (+ NaN everywhere once the cache holds `nan_from` positions, when
asked: a NaN that enters at a later step through a position-dependent path); the "cache"
present.0.key = Concat(past_key_values.0.key, E[input_ids]) on the sequence axis, fed back as past.
Greedy decoding of it picks argmax E[token], so every token is known in advance.
"""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

VOCAB = 6


def embedding(changed_row: Optional[int] = None, nan_at: Optional[Tuple[int, int]] = None) -> np.ndarray:
    """E[t] peaks at (t + 1) % VOCAB: greedy decoding from t runs t+1, t+2, ... With `changed_row`,
    that row peaks at 0 instead; with `nan_at`, E holds a NaN there (an lm_head weight's NaN)."""
    table = np.full((VOCAB, VOCAB), 0.1, np.float32)
    for t in range(VOCAB):
        table[t, (t + 1) % VOCAB] = 1.0 + 0.1 * t
    if changed_row is not None:
        table[changed_row] = 0.1
        table[changed_row, 0] = 2.0
    if nan_at is not None:
        table[nan_at] = np.nan
    return table


def tiny_decoder(table: np.ndarray, nan_from: Optional[int] = None) -> onnx.ModelProto:
    nodes = [helper.make_node("Gather", ["E", "input_ids"], ["emb"], axis=0),
             helper.make_node("Concat", ["past_key_values.0.key", "emb"], ["present.0.key"], axis=1)]
    inits = [numpy_helper.from_array(table, "E")]
    if nan_from is None:
        nodes.append(helper.make_node("Identity", ["emb"], ["logits"]))
    else:  # + NaN once the past holds nan_from positions, else + 0
        nodes += [helper.make_node("Shape", ["past_key_values.0.key"], ["past_shape"], start=1, end=2),
                  helper.make_node("Cast", ["past_shape"], ["past_len"], to=TensorProto.FLOAT),
                  helper.make_node("GreaterOrEqual", ["past_len", "from"], ["late"]),
                  helper.make_node("Where", ["late", "nan", "zero"], ["poison"]),
                  helper.make_node("Add", ["emb", "poison"], ["logits"])]
        inits += [numpy_helper.from_array(np.array([nan_from], np.float32), "from"),
                  numpy_helper.from_array(np.array([np.nan], np.float32), "nan"),
                  numpy_helper.from_array(np.array([0.0], np.float32), "zero")]
    graph = helper.make_graph(
        nodes, "tiny_decoder",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "seq"]),
         helper.make_tensor_value_info("past_key_values.0.key", TensorProto.FLOAT, [1, "past", VOCAB])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, "seq", VOCAB]),
         helper.make_tensor_value_info("present.0.key", TensorProto.FLOAT, [1, "total", VOCAB])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def own_greedy(path: str, prompt: Sequence[int], steps: int) -> Tuple[List[int], List[np.ndarray]]:
    """Greedy decoding with onnxruntime alone, present fed back to past: (tokens, last-position logits)."""
    import onnxruntime as ort

    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    past = np.zeros((1, 0, VOCAB), np.float32)
    fed, tokens, logits = list(prompt), [], []
    for _ in range(steps):
        out, past = session.run(["logits", "present.0.key"],
                                {"input_ids": np.asarray([fed], np.int64), "past_key_values.0.key": past})
        logits.append(out[0, -1])
        tokens.append(int(out[0, -1].argmax()))
        fed = [tokens[-1]]
    return tokens, logits


def step_folder(folder: Path, steps: Sequence[Sequence[int]]) -> Path:
    """A --sequence folder: one step sample of input_ids per entry."""
    folder.mkdir(parents=True, exist_ok=True)
    for k, ids in enumerate(steps):
        np.savez(folder / f"step_{k:04d}.npz", input_ids=np.asarray([list(ids)], np.int64))
    return folder
