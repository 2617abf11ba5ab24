"""Export one config-built transformers causal LM with onnxruntime-genai's model builder, as users do
(`python -m onnxruntime_genai.models.builder -i HF_FOLDER -o OUT -p PRECISION -e cpu`), and record
onnxruntime-genai's own greedy Generator's tokens on the zoo's prompts: the decode truth.

Runs inside the onnxruntime-genai venv (docs/zoo.md: the builder needs a newer transformers than the
dev extra, and onnxruntime-genai's runtime), started by zoolib.genai through a subprocess; it
imports nothing of the zoo, only its arguments:

    python genai_export.py ARCH CONFIG_JSON OUT_DIR PRECISIONS PROMPTS.json STEPS SAMPLE.npz

ARCH is the transformers class (LlamaForCausalLM, Qwen2ForCausalLM, Phi3ForCausalLM), CONFIG_JSON
the config class name and its keyword arguments, PRECISIONS a comma list (fp32,int4,int8,fp16).
Random init under seed 0, save_pretrained with a word-level tokenizer (the builder loads one; nothing
is downloaded), then one builder run per precision into OUT_DIR/<precision>/ (model.onnx,
model.onnx.data, genai_config.json, tokenizer files). On stdout, one JSON line: per precision the
builder's outcome, the torch-vs-onnxruntime max |logits| error on SAMPLE (fp32), and the Generator's
tokens per prompt: free-running (`generate_next_token`, greedy) and teacher-forced on fp32's own
tokens (each step `append_tokens` of fp32's token, the argmax of `get_logits`).
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path
from typing import Dict, List, Optional


def _hf_folder(arch: str, spec: Dict[str, object], folder: Path):
    import torch
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    torch.manual_seed(0)
    config = getattr(transformers, str(spec["config"]))(**spec["kwargs"])  # type: ignore[arg-type]
    model = getattr(transformers, arch)(config).eval()
    model.save_pretrained(folder)
    vocab_size = int(spec["kwargs"]["vocab_size"])  # type: ignore[index]
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{f"t{i}": i for i in range(3, vocab_size)}}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>", bos_token="<s>",
                                         eos_token="</s>").save_pretrained(folder)
    return model


def _generator(folder: Path, prompts: List[List[int]], steps: int,
               forced: Optional[List[List[int]]] = None) -> List[Dict[str, object]]:
    """onnxruntime-genai's Generator on each prompt: greedy free-running tokens (it stops at EOS), or
    with `forced` the argmax of its logits while it is fed those tokens (teacher forcing)."""
    import numpy as np
    import onnxruntime_genai as og

    model = og.Model(str(folder))
    out = []
    for index, prompt in enumerate(prompts):
        params = og.GeneratorParams(model)
        params.set_search_options(max_length=len(prompt) + steps, do_sample=False)
        generator = og.Generator(model, params)
        generator.append_tokens(prompt)
        tokens: List[int] = []
        limit = steps if forced is None else min(steps, len(forced[index]))  # fp32 may have stopped at EOS
        for k in range(limit):
            if forced is None:
                if generator.is_done():
                    break
                generator.generate_next_token()
                tokens.append(int(generator.get_next_tokens()[0]))
            else:
                logits = np.asarray(generator.get_logits())
                tokens.append(int(logits.reshape(-1, logits.shape[-1])[-1].argmax()))
                if k + 1 < limit:
                    generator.append_tokens([forced[index][k]])
        out.append({"tokens": tokens, "stopped_at_eos": forced is None and len(tokens) < steps})
        del generator
    return out


def _torch_error(model, folder: Path, sample: str) -> float:
    import numpy as np
    import onnxruntime as ort
    import torch

    with np.load(sample, allow_pickle=False) as z:
        feed = {k: z[k] for k in z.files}
    session = ort.InferenceSession(str(folder / "model.onnx"), providers=["CPUExecutionProvider"])
    names = {i.name: i for i in session.get_inputs()}
    floats = np.float16 if names[next(n for n in names if n.startswith("past"))].type == "tensor(float16)" else np.float32
    ort_feed = {n: (feed[n].astype(floats) if feed[n].dtype == np.float32 else feed[n]) for n in names if n in feed}
    if "position_ids" in names and "position_ids" not in ort_feed:
        ort_feed["position_ids"] = np.arange(feed["input_ids"].shape[1], dtype=np.int64)[None]
    got = session.run(["logits"], ort_feed)[0].astype(np.float64)
    with torch.no_grad():
        expected = model(input_ids=torch.from_numpy(feed["input_ids"]),
                         attention_mask=torch.from_numpy(feed["attention_mask"])).logits.numpy()
    keep = feed["attention_mask"][0].astype(bool)  # padded positions are not compared (the builder masks them alike)
    return float(np.max(np.abs(got[:, keep] - expected[:, keep])))


def main(arch: str, config_json: str, out_dir: str, precisions: str, prompts_path: str, steps: str,
         sample: str) -> int:
    import onnxruntime as ort
    import torch
    import transformers

    spec = json.loads(config_json)
    prompts = json.loads(Path(prompts_path).read_text())
    out = Path(out_dir)
    work = Path(tempfile.mkdtemp(prefix="mi-zoo-genai-"))
    facts: Dict[str, object] = {
        "exporter": f"onnxruntime-genai {version('onnxruntime-genai')} model builder (-e cpu)",
        "versions": {"onnxruntime-genai": version("onnxruntime-genai"), "onnxruntime": ort.__version__,
                     "torch": torch.__version__, "transformers": transformers.__version__,
                     "onnx": version("onnx"), "onnx-ir": version("onnx-ir")},
        "precisions": {}}
    try:
        model = _hf_folder(arch, spec, work / "hf")
        for precision in precisions.split(","):
            target = out / precision
            shutil.rmtree(target, ignore_errors=True)
            proc = subprocess.run([sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(work / "hf"),
                                   "-o", str(target), "-p", precision, "-e", "cpu", "-c", str(work / "cache")],
                                  capture_output=True, text=True)
            entry: Dict[str, object] = {"command": f"python -m onnxruntime_genai.models.builder -i HF -o OUT "
                                                   f"-p {precision} -e cpu"}
            if proc.returncode != 0 or not (target / "model.onnx").exists():
                tail = [ln for ln in proc.stderr.splitlines() if ln.strip()][-1:]
                entry["failed"] = f"builder exit {proc.returncode}: {tail[0][:300] if tail else ''}"
                shutil.rmtree(target, ignore_errors=True)
            else:
                entry["torch_vs_ort_max_abs"] = _torch_error(model, target, sample)
            facts["precisions"][precision] = entry  # type: ignore[index]
        built = [p for p, e in facts["precisions"].items() if "failed" not in e]  # type: ignore[union-attr]
        reference = _generator(out / "fp32", prompts, int(steps)) if "fp32" in built else []
        for precision in built:
            entry = facts["precisions"][precision]  # type: ignore[index]
            try:
                free = reference if precision == "fp32" else _generator(out / precision, prompts, int(steps))
                forced = _generator(out / precision, prompts, int(steps),
                                    forced=[r["tokens"] for r in reference]) if reference else []
                entry["generator"] = {"free_running": free, "teacher_forced": forced}
            except Exception as exc:  # noqa: BLE001 - the runtime's own failure is a fact of the export
                entry["generator_failed"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(facts))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:8]))
