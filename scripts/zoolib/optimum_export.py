"""Export one config-built transformers causal LM with optimum's exporter, as users do:
`main_export(..., task="text-generation-with-past")` (what `optimum-cli export onnx` runs).

Runs inside the optimum venv (docs/zoo.md: its pins conflict with the dev extra), started by
zoolib.decoders through a subprocess; it imports nothing of the zoo, only its arguments:

    python optimum_export.py ARCH CONFIG_JSON OUT.onnx SAMPLE.npz

ARCH is the transformers class (GPT2LMHeadModel, LlamaForCausalLM), CONFIG_JSON the config class
name and its keyword arguments. Random init under seed 0, save_pretrained to a temporary folder,
then the export; the torch-vs-onnxruntime max |logits| error on SAMPLE goes into the JSON on stdout.
"""
from __future__ import annotations

import json
from importlib.metadata import version
import shutil
import sys
import tempfile
from pathlib import Path


def main(arch: str, config_json: str, out: str, sample: str) -> int:
    import numpy as np
    import onnxruntime as ort
    import torch
    import transformers
    from optimum.exporters.onnx import main_export

    spec = json.loads(config_json)
    torch.manual_seed(0)
    config = getattr(transformers, spec["config"])(**spec["kwargs"])
    model = getattr(transformers, arch)(config).eval()
    work = Path(tempfile.mkdtemp(prefix="mi-zoo-optimum-"))
    try:
        model.save_pretrained(work / "hf")
        main_export(str(work / "hf"), output=str(work / "onnx"), task="text-generation-with-past",
                    device="cpu", opset=spec.get("opset"))
        shutil.move(str(work / "onnx" / "model.onnx"), out)
        for data in (work / "onnx").glob("model.onnx?*"):  # past 2 GB: model.onnx_data, referenced by name
            shutil.move(str(data), str(Path(out).with_name(data.name)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    with np.load(sample, allow_pickle=False) as z:
        feed = {k: z[k] for k in z.files}
    session = ort.InferenceSession(out, providers=["CPUExecutionProvider"])
    got = session.run(["logits"], {i.name: feed[i.name] for i in session.get_inputs()})[0]
    with torch.no_grad():
        expected = model(input_ids=torch.from_numpy(feed["input_ids"]),
                         attention_mask=torch.from_numpy(feed["attention_mask"])).logits.numpy()
    error = float(np.max(np.abs(got.astype(np.float64) - expected)))
    opset = max(o.version for o in __import__("onnx").load(out, load_external_data=False).opset_import
                if o.domain in ("", "ai.onnx"))
    print(json.dumps({"exporter": f"optimum {version('optimum')}, optimum-onnx {version('optimum-onnx')} (main_export, "
                      "text-generation-with-past)", "opset": opset, "torch_vs_ort_max_abs": error,
                      "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                                   "onnxruntime": ort.__version__}}))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
