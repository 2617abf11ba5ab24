"""Stateful models built once per test run (torch export takes a few seconds each)."""
from __future__ import annotations

from pathlib import Path
from typing import Dict

import numpy as np
import pytest

from tests.fixtures.helpers import save

from .models import accumulator_fp16, accumulator_fp32


@pytest.fixture(scope="session")
def rnn_models(tmp_path_factory) -> Dict[str, Path]:
    """GRU and LSTM steps exported from torch, each with an int8 (quantize_dynamic), an fp16-I/O and a
    'recurrence x factor' variant, plus 60 step samples."""
    pytest.importorskip("torch")
    from .models import (
        export_rnn,
        fp16_io,
        quantize_int8,
        scale_head,
        scale_recurrence,
        step_inputs,
    )

    folder = tmp_path_factory.mktemp("rnn")
    models: Dict[str, Path] = {"steps": step_inputs(folder / "steps", 60)}
    # Long memory (a bias on the gate that keeps the state) so that a carried error accumulates.
    for kind, memory, factor in (("gru", 2.0, 2.0), ("lstm", 4.0, 1.3)):
        base = export_rnn(kind, folder / f"{kind}.onnx", memory=memory)
        models[kind] = base
        models[f"{kind}_int8"] = quantize_int8(base, folder / f"{kind}_int8.onnx")
        models[f"{kind}_fp16"] = fp16_io(base, folder / f"{kind}_fp16.onnx")
        models[f"{kind}_recurrence"] = scale_recurrence(base, folder / f"{kind}_recurrence.onnx", factor)
        models[f"{kind}_head"] = scale_head(base, folder / f"{kind}_head.onnx", 1.5)
    return models


@pytest.fixture(scope="session")
def gpt_models(tmp_path_factory) -> Dict[str, Path]:
    """The tiny GPT-2 decoder and its int8 (quantize_dynamic) version."""
    pytest.importorskip("transformers")
    from .models import export_gpt2, quantize_int8

    folder = tmp_path_factory.mktemp("gpt")
    fp32 = export_gpt2(folder / "gpt.onnx")
    return {"fp32": fp32, "int8": quantize_int8(fp32, folder / "gpt_int8.onnx")}


@pytest.fixture(scope="session")
def gpt_int4(gpt_models, tmp_path_factory) -> Path:
    """The tiny GPT-2 with int4 weights (MatMulNBits), built here from the fp32 export."""
    try:
        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer  # noqa: F401
    except ImportError:
        pytest.skip("this onnxruntime has no MatMulNBitsQuantizer (onnxruntime.quantization.matmul_nbits_quantizer)")
    from .models import quantize_int4

    return quantize_int4(gpt_models["fp32"], tmp_path_factory.mktemp("gpt4") / "gpt_int4.onnx")


@pytest.fixture()
def accumulators(tmp_path):
    """The fp16 and fp32 accumulators (the fp16 one overflows after some steps) and 100 steps of ones."""
    fp16 = save(accumulator_fp16(), tmp_path / "acc16.onnx")
    fp32 = save(accumulator_fp32(), tmp_path / "acc32.onnx")
    np.savez(tmp_path / "ones16.npz", x=np.ones((100, 1, 4), np.float16))
    np.savez(tmp_path / "ones32.npz", x=np.ones((100, 1, 4), np.float32))
    return fp16, fp32, tmp_path
