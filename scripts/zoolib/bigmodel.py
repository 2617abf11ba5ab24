"""A decoder past 2 GB, built on demand and cached (never committed): the memory benchmark's model.

A Llama-style decoder from a transformers `LlamaConfig` (random init, seed 0), 607 M parameters:
`torch.onnx.export` writes its fp32 weights (2.43 GB) as external data, as it must past protobuf's
2 GB limit. Beside it, an int4 variant (onnxruntime's MatMulNBits quantizer, block 128), the pair
a user compares. No KV cache: inputs are `input_ids` and `attention_mask`, the output `logits`.

    python scripts/zoolib/bigmodel.py OUT_DIR      # builds OUT_DIR/big_llama/{fp32,int4}/model.onnx

The same decoder with a KV cache for `compare --decode` (`ensure_decoder`: OUT_DIR/big_llama_kv):
exported by optimum's `main_export(task="text-generation-with-past")` in its own venv
(zoolib.decoders.export; $MI_ZOO_OPTIMUM_PYTHON, docs/zoo.md), past_key_values.N.* in, present.N.*
out, 2.43 GB of external data (model.onnx_data), and its int4 variant.

A second call finds the cached files (a stamp holds the recipe) and returns at once.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Callable, Dict

RECIPE = {"hidden_size": 1536, "intermediate_size": 4096, "num_hidden_layers": 18, "num_attention_heads": 12,
          "num_key_value_heads": 12, "vocab_size": 32000, "max_position_embeddings": 256, "opset": 17,
          "int4_block": 128, "version": 1}
SEQUENCE = 16
"""Tokens of the benchmark's sample (batch 1)."""
NAME = "big_llama"


def ensure(out_dir: Path) -> Dict[str, Path]:
    """Paths of the fp32 and int4 models under `out_dir/big_llama`, built first when missing."""
    return _build_once(Path(out_dir).resolve() / NAME, _export_fp32)


def _build_once(root: Path, export: Callable[[Path], None]) -> Dict[str, Path]:
    """`root`'s fp32 and int4 model paths; `export(fp32 path)` and the int4 quantisation run first unless
    a stamp of this RECIPE says both are there."""
    stamp = root / "recipe.json"
    paths = {"fp32": root / "fp32" / "model.onnx", "int4": root / "int4" / "model.onnx"}
    if stamp.is_file() and json.loads(stamp.read_text()) == RECIPE and all(p.is_file() for p in paths.values()):
        return paths
    (root / "fp32").mkdir(parents=True, exist_ok=True)
    (root / "int4").mkdir(parents=True, exist_ok=True)
    export(paths["fp32"])
    _quantise_int4(paths["fp32"], paths["int4"])
    stamp.write_text(json.dumps(RECIPE))
    return paths


KV_NAME = "big_llama_kv"


def ensure_decoder(out_dir: Path) -> Dict[str, Path]:
    """The KV-cache decoder's fp32 and int4 models under `out_dir/big_llama_kv`, built first when missing
    (raises zoolib.decoders.Unavailable without an optimum venv)."""
    from . import decoders

    return _build_once(Path(out_dir).resolve() / KV_NAME, lambda path: _export_with_past(path, decoders))


def _export_with_past(path: Path, decoders: Any) -> None:
    kwargs = {k: v for k, v in RECIPE.items() if k not in ("opset", "int4_block", "version")}
    recipe = {"arch": "LlamaForCausalLM", "config": "LlamaConfig", "opset": RECIPE["opset"],
              "kwargs": {**kwargs, "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2}}
    head_dim = RECIPE["hidden_size"] // RECIPE["num_attention_heads"]
    sample = decoders.plain_inputs(RECIPE["num_hidden_layers"], RECIPE["num_key_value_heads"], head_dim,
                                   RECIPE["vocab_size"])(1, 0)[0]
    decoders.export(recipe, path, sample)


class _Logits:
    """forward(input_ids, attention_mask) -> logits only (no cache), for a plain export."""

    def __new__(cls, model):  # a torch.nn.Module subclass made lazily: torch is imported late
        import torch

        class Wrapper(torch.nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, input_ids, attention_mask):
                return self.inner(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits

        return Wrapper(model)


def _export_fp32(path: Path) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(**{k: v for k, v in RECIPE.items() if k not in ("opset", "int4_block", "version")},
                         tie_word_embeddings=False)
    config._attn_implementation = "eager"  # the exporter traces plain ops, as optimum exports do
    model = LlamaForCausalLM(config).eval()
    ids = torch.randint(0, RECIPE["vocab_size"], (1, SEQUENCE), dtype=torch.int64)
    mask = torch.ones((1, SEQUENCE), dtype=torch.int64)
    with torch.no_grad():
        torch.onnx.export(_Logits(model), (ids, mask), str(path), dynamo=False, do_constant_folding=True,
                          opset_version=RECIPE["opset"], input_names=["input_ids", "attention_mask"],
                          output_names=["logits"],
                          dynamic_axes={"input_ids": {0: "batch", 1: "sequence"},
                                        "attention_mask": {0: "batch", 1: "sequence"},
                                        "logits": {0: "batch", 1: "sequence"}})
    del model
    import onnx

    # torch writes one file per weight past 2 GB; one data file is what optimum and users ship.
    proto = onnx.load(str(path))
    for stale in path.parent.iterdir():
        if stale != path:
            stale.unlink()
    onnx.save(proto, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
              location="model.onnx.data", size_threshold=1024)


def _quantise_int4(source: Path, target: Path) -> None:
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    proto = onnx.load(str(source))
    quantizer = MatMulNBitsQuantizer(proto, block_size=RECIPE["int4_block"], is_symmetric=True)
    quantizer.process()
    onnx.save(quantizer.model.model, str(target), save_as_external_data=True, all_tensors_to_one_file=True,
              location="model.onnx.data", size_threshold=1024)


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    built = ensure(Path(sys.argv[1]))
    try:
        built.update({f"{k} (KV cache)": v for k, v in ensure_decoder(Path(sys.argv[1])).items()})
    except Exception as exc:  # no optimum venv: the decoder is optional (decoders.Unavailable)
        print(f"KV-cache decoder not built: {exc}", file=sys.stderr)
    for variant, path in built.items():
        data = sum(p.stat().st_size for p in path.parent.iterdir() if p != path)
        print(f"{variant}: {path} ({data / 2**30:.2f} GiB of external data)")
    return 0


if __name__ == "__main__":  # run as a file: import it as zoolib.bigmodel, so that its relative imports work
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from zoolib.bigmodel import main as package_main

    sys.exit(package_main())
