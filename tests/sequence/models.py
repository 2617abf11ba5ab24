"""Stateful test models: torch-exported GRU/LSTM steps, an fp16 accumulator that overflows, a tiny GPT-2.

Torch and transformers are imported inside the builders, so modules that only need the onnx.helper
models import nothing heavy.
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.fixtures.helpers import init, make_model, save, vi

F, H = TensorProto.FLOAT, TensorProto.FLOAT16
N_IN, HIDDEN, N_OUT = 8, 16, 5


# ---- GRU / LSTM steps exported from torch -------------------------------------------------------------
def export_rnn(kind: str, path: Path, seed: int = 0, memory: float = 0.0) -> Path:
    """One step of a GRU or LSTM with explicit state I/O: (x, h0[, c0]) -> (logits, hn[, cn]).

    `memory` is added to the bias of the gate that keeps the old state (GRU update gate z, LSTM
    forget gate f): a long memory, so that an error carried in the state accumulates over steps."""
    import torch

    torch.manual_seed(seed)

    class Step(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            cls = torch.nn.GRU if kind == "gru" else torch.nn.LSTM
            self.rnn = cls(N_IN, HIDDEN, batch_first=True)
            self.head = torch.nn.Linear(HIDDEN, N_OUT)

        def forward(self, x, h0, c0=None):  # type: ignore[no-untyped-def]
            if kind == "gru":
                y, hn = self.rnn(x, h0)
                return self.head(y[:, -1]), hn
            y, (hn, cn) = self.rnn(x, (h0, c0))
            return self.head(y[:, -1]), hn, cn

    model = Step().eval()
    with torch.no_grad():  # gate order: GRU (r, z, n), LSTM (i, f, g, o)
        model.rnn.bias_ih_l0[HIDDEN:2 * HIDDEN] += memory
    x = torch.randn(1, 1, N_IN)
    h0 = torch.zeros(1, 1, HIDDEN)
    args: Tuple = (x, h0) if kind == "gru" else (x, h0, torch.zeros(1, 1, HIDDEN))
    names_in = ["x", "h0"] + ([] if kind == "gru" else ["c0"])
    names_out = ["logits", "hn"] + ([] if kind == "gru" else ["cn"])
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():  # the exporter's notes on RNN batch_first are not about the test
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, str(path), input_names=names_in, output_names=names_out, opset_version=17,
                          dynamo=False)
    return path


def rnn_node(model: onnx.ModelProto) -> onnx.NodeProto:
    return next(n for n in model.graph.node if n.op_type in ("GRU", "LSTM"))


def scale_recurrence(src: Path, dst: Path, factor: float) -> Path:
    """The same model with the recurrent weights R multiplied by `factor` (an error that only the
    carried state sees: the step's input path is untouched)."""
    model = onnx.load(str(src))
    r_name = rnn_node(model).input[2]
    for i, tensor in enumerate(model.graph.initializer):
        if tensor.name == r_name:
            array = numpy_helper.to_array(tensor) * np.float32(factor)
            model.graph.initializer[i].CopyFrom(numpy_helper.from_array(array.astype(np.float32), r_name))
    return save(model, dst)


def scale_head(src: Path, dst: Path, factor: float) -> Path:
    """The same model with the output head's weight scaled: an error in the step itself."""
    model = onnx.load(str(src))
    gemm = next(n for n in model.graph.node if n.op_type in ("Gemm", "MatMul"))
    w_name = gemm.input[1]
    for i, tensor in enumerate(model.graph.initializer):
        if tensor.name == w_name:
            array = numpy_helper.to_array(tensor) * np.float32(factor)
            model.graph.initializer[i].CopyFrom(numpy_helper.from_array(array.astype(np.float32), w_name))
    return save(model, dst)


def fp16_io(src: Path, dst: Path) -> Path:
    """fp16 inputs, outputs and carried state around the fp32 computation: the state is rounded to
    fp16 at every step, as in a model deployed with fp16 I/O."""
    model = onnx.load(str(src))
    graph = model.graph
    rename: Dict[str, str] = {}
    for value in list(graph.input) + list(graph.output):
        if value.type.tensor_type.elem_type == F:
            rename[value.name] = value.name + "_f32"
            value.type.tensor_type.elem_type = H
    for node in graph.node:
        node.input[:] = [rename.get(n, n) for n in node.input]
        node.output[:] = [rename.get(n, n) for n in node.output]
    head = [helper.make_node("Cast", [v.name], [rename[v.name]], name=f"cast_in_{v.name}", to=F)
            for v in graph.input if v.name in rename]
    tail = [helper.make_node("Cast", [rename[v.name]], [v.name], name=f"cast_out_{v.name}", to=H)
            for v in graph.output if v.name in rename]
    body = head + list(graph.node) + tail
    del graph.node[:]
    graph.node.extend(body)
    del graph.value_info[:]
    return save(model, dst)


def quantize_int8(src: Path, dst: Path) -> Path:
    """int8 weights (quantize_dynamic) of 7 bits (reduce_range), as onnxruntime advises for CPUs without
    VNNI: x86 with AVX2 and no VNNI adds pairs of uint8 x int8 products in a saturating int16, which
    full-range weights overflow (core/fingerprint.u8s8_saturates). Measured on an AMD EPYC (AVX2, no
    VNNI), 60 steps: the full-range LSTM's logits fall to cosine 0.8271 (0.9998 with reduce_range), the
    GRU's to 0.9878 (0.99998). With 7 bits the integer sums are exact on every CPU, so these models and
    the expectations on them are the same everywhere."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8, reduce_range=True)
    return dst


def step_inputs(folder: Path, steps: int, seed: int = 3, scale: float = 1.0) -> Path:
    """A folder of per-step samples step_0000.npz ... holding x [1, 1, N_IN]."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for t in range(steps):
        np.savez(folder / f"step_{t:04d}.npz", x=(rng.standard_normal((1, 1, N_IN)) * scale).astype(np.float32))
    return folder


def reference_loop(path: Path, xs: Sequence[np.ndarray], state: Dict[str, np.ndarray],
                   pairs: Sequence[Tuple[str, str]]) -> List[Dict[str, np.ndarray]]:
    """A plain onnxruntime loop, independent of mi: every step's outputs."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    dtypes = {i.name: (np.float16 if i.type == "tensor(float16)" else np.float32) for i in session.get_inputs()}
    outs = []
    state = dict(state)
    for x in xs:
        feeds = {"x": x.astype(dtypes["x"]), **{k: v.astype(dtypes[k]) for k, v in state.items()}}
        values = dict(zip(names, session.run(names, feeds)))
        outs.append(values)
        state = {i: values[o] for i, o in pairs}
    return outs


# ---- fp16 accumulator that overflows ----------------------------------------------------------------
def accumulator_fp16(step_gain: float = 1000.0) -> onnx.ModelProto:
    """acc_out = acc + x * gain (fp16), y = acc_out * 0.001, d = acc_out - acc_out.

    With x = 1 the accumulator passes fp16's 65504 after 66 steps: acc_out turns Inf at 'accumulate'
    (step 65, counting from 0), y turns Inf and d NaN (Inf - Inf) at the same step."""
    nodes = [helper.make_node("Mul", ["x", "gain"], ["inc"], name="gain"),
             helper.make_node("Add", ["acc", "inc"], ["acc_out"], name="accumulate"),
             helper.make_node("Mul", ["acc_out", "milli"], ["y"], name="scale_out"),
             helper.make_node("Sub", ["acc_out", "acc_out"], ["d"], name="difference")]
    return make_model(nodes, [vi("x", [1, 4], H), vi("acc", [1, 4], H)],
                      [vi("y", [1, 4], H), vi("d", [1, 4], H), vi("acc_out", [1, 4], H)],
                      [init("gain", np.array(step_gain, np.float16)), init("milli", np.array(0.001, np.float16))])


def accumulator_fp32() -> onnx.ModelProto:
    """The same accumulator in fp32 (never overflows in the tested range)."""
    nodes = [helper.make_node("Mul", ["x", "gain"], ["inc"], name="gain"),
             helper.make_node("Add", ["acc", "inc"], ["acc_out"], name="accumulate"),
             helper.make_node("Mul", ["acc_out", "milli"], ["y"], name="scale_out"),
             helper.make_node("Sub", ["acc_out", "acc_out"], ["d"], name="difference")]
    return make_model(nodes, [vi("x", [1, 4]), vi("acc", [1, 4])], [vi("y", [1, 4]), vi("d", [1, 4]), vi("acc_out", [1, 4])],
                      [init("gain", np.array(1000.0, np.float32)), init("milli", np.array(0.001, np.float32))])


# ---- a tiny GPT-2 decoder with past key/values ---------------------------------------------------------
GPT_LAYERS, GPT_HEADS, GPT_EMBD, GPT_VOCAB = 2, 2, 32, 64


def export_gpt2(path: Path, seed: int = 0) -> Path:
    """transformers' GPT-2 (random init, 2 layers, vocab 64) exported with input_ids, attention_mask and
    past_key_values.N.key/value as inputs, logits and present.N.key/value as outputs."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.cache_utils import DynamicCache

    config = GPT2Config(vocab_size=GPT_VOCAB, n_positions=256, n_embd=GPT_EMBD, n_layer=GPT_LAYERS, n_head=GPT_HEADS,
                        bos_token_id=0, eos_token_id=0, initializer_range=0.3)
    torch.manual_seed(seed)
    model = GPT2LMHeadModel(config).eval()

    class Step(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, *past):  # type: ignore[no-untyped-def]
            cache = DynamicCache(ddp_cache_data=[(past[2 * i], past[2 * i + 1]) for i in range(GPT_LAYERS)], config=config)
            out = self.model(input_ids=input_ids, attention_mask=attention_mask, past_key_values=cache, use_cache=True)
            presents = [t for layer in out.past_key_values.layers for t in (layer.keys, layer.values)]
            return (out.logits, *presents)

    head = GPT_EMBD // GPT_HEADS
    past = [torch.randn(1, GPT_HEADS, 3, head) for _ in range(2 * GPT_LAYERS)]
    ids = torch.tensor([[5, 7]])
    mask = torch.ones(1, 5, dtype=torch.int64)
    kv_names = [f"past_key_values.{i}.{kind}" for i in range(GPT_LAYERS) for kind in ("key", "value")]
    present = [f"present.{i}.{kind}" for i in range(GPT_LAYERS) for kind in ("key", "value")]
    axes = {"input_ids": {1: "sequence"}, "attention_mask": {1: "total_sequence"}, "logits": {1: "sequence"}}
    axes.update({n: {2: "past_sequence"} for n in kv_names})
    axes.update({n: {2: "total_sequence"} for n in present})
    path.parent.mkdir(parents=True, exist_ok=True)
    with torch.no_grad(), warnings.catch_warnings():  # tracer notes on transformers' Python branches
        warnings.simplefilter("ignore")
        torch.onnx.export(Step().eval(), (ids, mask, *past), str(path), input_names=["input_ids", "attention_mask"] + kv_names,
                          output_names=["logits"] + present, dynamic_axes=axes, opset_version=17, dynamo=False)
    return path


def gpt2_greedy_without_cache(path: Path, prompt: Sequence[int], steps: int,
                              teacher: "Sequence[int] | None" = None) -> Tuple[List[int], List[np.ndarray]]:
    """Greedy decoding by re-running the whole sequence every step with an empty cache: the reference
    that does not depend on the KV-cache wiring. With `teacher`, the fed tokens are those instead."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    head = GPT_EMBD // GPT_HEADS
    empty = {f"past_key_values.{i}.{k}": np.zeros((1, GPT_HEADS, 0, head), np.float32)
             for i in range(GPT_LAYERS) for k in ("key", "value")}
    sequence, chosen, logits = list(prompt), [], []
    for step in range(steps):
        ids = np.asarray([sequence], np.int64)
        out = session.run(["logits"], {"input_ids": ids, "attention_mask": np.ones_like(ids), **empty})[0]
        logits.append(out[:, -1])
        token = int(out[0, -1].argmax())
        chosen.append(token)
        sequence.append(teacher[step] if teacher is not None else token)
    return chosen, logits


def gpt2_greedy_with_cache(path: Path, prompt: Sequence[int], steps: int,
                           teacher: "Sequence[int] | None" = None) -> Tuple[List[int], List[np.ndarray]]:
    """Greedy decoding with the KV cache fed back, in a plain onnxruntime loop: the whole prompt first
    (empty cache), then one token per step, the attention mask ones over past and new tokens. The
    reference for a dynamically quantised model: its activation scale is taken per run from the whole
    input, so a whole-sequence rerun (`gpt2_greedy_without_cache`) is another computation."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    head = GPT_EMBD // GPT_HEADS
    past_names = [f"past_key_values.{i}.{k}" for i in range(GPT_LAYERS) for k in ("key", "value")]
    outputs = ["logits"] + [name.replace("past_key_values", "present") for name in past_names]
    past = {name: np.zeros((1, GPT_HEADS, 0, head), np.float32) for name in past_names}
    fed, seen, chosen, logits = list(prompt), 0, [], []
    for step in range(steps):
        seen += len(fed)
        out = session.run(outputs, {"input_ids": np.asarray([fed], np.int64),
                                    "attention_mask": np.ones((1, seen), np.int64), **past})
        past = dict(zip(past_names, out[1:]))
        logits.append(out[0][:, -1])
        token = int(out[0][0, -1].argmax())
        chosen.append(token)
        fed = [teacher[step] if teacher is not None else token]
    return chosen, logits


def quantize_int4(src: Path, dst: Path, block_size: int = 16) -> Path:
    """Weight-only int4 (onnxruntime's MatMulNBitsQuantizer, symmetric, blocks of `block_size`): the
    MatMuls with constant weights (GPT-2's lm_head; its Conv1D layers export as Gemm, which the
    quantizer leaves alone) become com.microsoft MatMulNBits."""
    import logging

    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    logging.getLogger("onnxruntime.quantization.matmul_nbits_quantizer").setLevel(logging.WARNING)
    quantizer = MatMulNBitsQuantizer(onnx.load(str(src)), bits=4, block_size=block_size, is_symmetric=True)
    quantizer.process()
    quantizer.model.save_model_to_file(str(dst))
    return dst
