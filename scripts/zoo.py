#!/usr/bin/env python3
"""Build the real-model zoo: real architectures with random init (fixed seeds, nothing downloaded),
exported as users export them, plus their quantised / fp16 / renamed variants and realistic samples.

    python scripts/zoo.py OUT_DIR [--fast] [--only NAME ...] [--variants V ...] [--samples N]
                          [--optimum-python PYTHON] [--genai-python PYTHON]

OUT_DIR/<model>/ holds fp32.onnx, <variant>.onnx, data/sample_NN.npz (what `mi --inputs` reads) and
manifest.json (recipe hash, exporter, opset, per-variant build seconds or the reason it was skipped).
A model folder whose recipe hash matches is reused; only missing files are built. See docs/zoo.md.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Dict, List, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

from zoolib import decoders as D  # noqa: E402
from zoolib import export as E  # noqa: E402
from zoolib import genai as G  # noqa: E402
from zoolib import samples as S  # noqa: E402
from zoolib.models import Spec, select  # noqa: E402
from zoolib.variants import VARIANTS, make, preprocess  # noqa: E402

ZOO_VERSION = 3  # bump when a recipe changes in a way the spec's fields do not show
QUANTISED = ("qdq_u8u8", "qdq_s8s8_pc", "qop", "dynamic")
DECODE_STEPS = 16  # the sweep's `--steps` (tests/zoo/sweep.py): the Generator decodes as many


def recipe_hash(spec: Spec, count: int) -> str:
    """Cache key: the spec's recipe, export settings, sample count and the tool versions that shape the files."""
    import onnx
    import onnxruntime
    versions = {"onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__}
    if spec.exporter != "skl2onnx":
        import torch
        versions["torch"] = torch.__version__
    key = {"zoo": ZOO_VERSION, "name": spec.name, "recipe": spec.recipe, "opset": spec.opset,
           "exporter": spec.exporter, "dynamic": spec.dynamic, "outputs": spec.output_names,
           "samples": count, "versions": versions}
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]


def build_model(spec: Spec, root: Path, variants: Sequence[str], count: int) -> Dict[str, object]:
    """Build (or reuse) one model folder; returns its manifest."""
    folder = root / spec.name
    digest = recipe_hash(spec, count)
    manifest_path = folder / "manifest.json"
    manifest: Dict[str, object] = {}
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("hash") != digest:
            shutil.rmtree(folder)
            manifest = {}
    folder.mkdir(parents=True, exist_ok=True)
    manifest.update(name=spec.name, kind=spec.kind, hash=digest)
    manifest.pop("unavailable", None)
    samples = spec.inputs(count, 0)
    if not (folder / "data").exists():
        S.save(samples, folder / "data")
    if spec.exporter == "optimum":  # the decode prompts (`mi compare --decode --prompt prompts.json`)
        (folder / "prompts.json").write_text(json.dumps(D.prompts(count, int(spec.recipe["kwargs"]["vocab_size"]))))
    if spec.exporter == "genai":  # the builder writes every precision, each its own folder
        return build_genai(spec, folder, manifest, samples, count)
    fp32 = folder / "fp32.onnx"
    if spec.refused:  # a model onnxruntime refuses on purpose (zoolib/edited.py): no variants, no run
        if not fp32.exists():
            manifest["fp32"] = E.export(spec, fp32, samples[0])
        manifest["refused"] = E.refusal(fp32, spec.refused)
        manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True))
        return manifest
    if not fp32.exists():
        start = time.perf_counter()
        try:
            manifest["fp32"] = E.export(spec, fp32, samples[0])
        except D.Unavailable as exc:  # no optimum here: the sweep skips the member with this reason
            manifest["unavailable"] = str(exc)
            manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True))
            return manifest
        manifest["fp32"]["seconds"] = round(time.perf_counter() - start, 2)
        if len(samples) > 1:
            try:
                E.refuse_degenerate(fp32, samples, spec.output_names)
            except ValueError:
                fp32.unlink()
                raise
    if spec.exporter == "optimum" and not (folder / "steps").exists():  # `--sequence` step inputs
        D.save_steps(fp32, json.loads((folder / "prompts.json").read_text())[0], folder / "steps")
    built = manifest.setdefault("variants", {})
    calib = spec.inputs(8, count)  # calibration samples are not the test samples
    pre = folder / "_prep.onnx"
    for variant in variants:
        out = folder / f"{variant}.onnx"
        if out.exists() or variant in manifest.setdefault("skipped", {}):
            continue
        if variant not in (spec.variants or VARIANTS):
            continue
        if variant == "int4" and not spec.int4:
            manifest["skipped"][variant] = "not a transformer (MatMulNBits applies to transformer MatMuls)"
            continue
        start = time.perf_counter()
        try:
            if variant in QUANTISED and not pre.exists():
                manifest["preprocess"] = preprocess(fp32, pre)
            if variant in D.NAN_VARIANTS:
                facts = D.make_nan(variant, spec.recipe, fp32, out, json.loads((folder / "prompts.json").read_text())[0])
            else:
                note = make(variant, fp32, pre, out, calib)
                facts = {"tool": note} if note else {}
            E.run(out, samples[0])  # a variant plain onnxruntime cannot run is no test of mi
            built[variant] = {"seconds": round(time.perf_counter() - start, 2), **facts}
        except Exception as exc:  # noqa: BLE001 - the tool refused this model: record the reason
            out.unlink(missing_ok=True)
            manifest["skipped"][variant] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True))
    return manifest


def build_genai(spec: Spec, folder: Path, manifest: Dict[str, object], samples: List[Dict[str, object]],
                count: int) -> Dict[str, object]:
    """An onnxruntime-genai builder member (zoolib/genai.py): `<precision>/model.onnx` (+ its data,
    genai_config.json, tokenizer) for fp32 and every precision; the Generator's tokens in the manifest."""
    manifest_path = folder / "manifest.json"
    prompts = D.prompts(count, G.VOCAB)
    (folder / "prompts.json").write_text(json.dumps(prompts))
    wanted = ("fp32",) + G.PRECISIONS
    if not all((folder / p / "model.onnx").exists() for p in wanted) or "fp32" not in manifest:
        start = time.perf_counter()
        try:
            facts = G.build(spec.name, folder, samples[0], prompts, DECODE_STEPS)
        except D.Unavailable as exc:  # no onnxruntime-genai here: the sweep skips the member with this reason
            manifest["unavailable"] = str(exc)
            manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True))
            return manifest
        per = facts.pop("precisions")
        manifest["fp32"] = {**facts, **per.get("fp32", {}), "opset": spec.opset,
                            "seconds": round(time.perf_counter() - start, 2)}
        manifest["variants"], manifest["skipped"] = {}, {}
        for precision in G.PRECISIONS:
            entry = per.get(precision, {"failed": "not built"})
            if "failed" in entry:
                manifest["skipped"][precision] = entry["failed"]
            else:
                manifest["variants"][precision] = entry
    if "failed" in manifest["fp32"]:
        raise RuntimeError(f"the builder's fp32 export failed: {manifest['fp32']['failed']}")
    for variant in [v for v in wanted if v == "fp32" or v in manifest["variants"]]:
        E.run(folder / variant / "model.onnx", samples[0])  # a variant plain onnxruntime cannot run is no test of mi
    if not (folder / "steps").exists():
        G.save_steps(folder, prompts[0], DECODE_STEPS)
    manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True))
    return manifest


def main(argv: List[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--only", nargs="+", help="model names (any, fast or not)")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS + D.NAN_VARIANTS,
                        default=list(VARIANTS + D.NAN_VARIANTS))
    parser.add_argument("--fast", action="store_true", help="the small CI subset (every variant kind)")
    parser.add_argument("--samples", type=int, default=4, help="test samples per model (default 4)")
    parser.add_argument("--optimum-python", metavar="PYTHON",
                        help=f"a python with optimum-onnx, for the *_optimum decoders (default: ${D.OPTIMUM_ENV})")
    parser.add_argument("--genai-python", metavar="PYTHON",
                        help=f"a python with onnxruntime-genai, for the *_genai decoders (default: ${G.GENAI_ENV})")
    args = parser.parse_args(argv)
    if args.genai_python:
        os.environ[G.GENAI_ENV] = str(Path(args.genai_python).absolute())
    if args.optimum_python:
        os.environ[D.OPTIMUM_ENV] = str(Path(args.optimum_python).absolute())
    warnings.filterwarnings("ignore")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    args.out_dir = args.out_dir.resolve()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    # onnxruntime's quantizer and symbolic shape inference leave temporary files (*.data,
    # sym_shape_infer_temp.onnx) in the working directory: give them a scratch one.
    scratch = tempfile.mkdtemp(prefix="mi-zoo-")
    os.chdir(scratch)
    total = time.perf_counter()
    for spec in select(args.only, args.fast):
        start = time.perf_counter()
        try:
            manifest = build_model(spec, args.out_dir, args.variants, args.samples)
        except Exception as exc:  # noqa: BLE001 - one model failing to export must not stop the zoo
            print(f"{spec.name}: FAILED {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        if manifest.get("unavailable"):
            print(f"{spec.name}: not built: {manifest['unavailable']}", file=sys.stderr)
            continue
        if manifest.get("refused"):
            print(f"{spec.name}: fp32 only, refused by onnxruntime as intended: {manifest['refused']}", file=sys.stderr)
            continue
        skipped = manifest.get("skipped", {})
        print(f"{spec.name}: {len(manifest['variants'])} variants, {len(skipped)} skipped "
              f"({time.perf_counter() - start:.1f}s)", file=sys.stderr)
        for variant, reason in skipped.items():
            print(f"  skipped {variant}: {reason}", file=sys.stderr)
    print(f"zoo built in {time.perf_counter() - total:.1f}s -> {args.out_dir}", file=sys.stderr)
    shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
