"""mi on a plugin execution provider over zoo models, checked against plain onnxruntime.

For each model: `mi compare` (outputs, then `--layers all`), `mi probe`, `mi nan-bisect` and `mi profile`
with the provider asked for (session B / the model), and, independently, two plain onnxruntime sessions
of the same model (CPU, and the plugin registered and added by device as its package documents it) run
on the same samples. It prints per model the placement each command read (nodes on the provider, fell
back, partitions) beside onnxruntime's own assignment record, and mi's output metrics (CPU vs plugin)
beside the ones computed from the plain sessions' outputs.

    python scripts/check_plugin_zoo.py --zoo /work/zoo --models resnet bert gpt2like --provider openvino
    python scripts/check_plugin_zoo.py --provider qnn -- --provider-option qnn:backend_type=htp

Arguments after `--` go to every mi command (and `--ep-library NAME=PATH`, `--provider-option P:K=V`
are honoured by the plain sessions too). Public tools only: numpy, onnxruntime.
"""
from __future__ import annotations

import argparse
import glob
import importlib
import json
import os
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

PLUGIN_MODULES = {"openvino": "onnxruntime_ep_openvino", "qnn": "onnxruntime_qnn"}
RECORD = "session.record_ep_graph_assignment_info"
REGISTERED: set = set()


def mi(args: List[str], out: str) -> Tuple[int, Dict[str, Any]]:
    proc = subprocess.run([sys.executable, "-m", "inspector_cli", *args, "--json", out], capture_output=True, text=True)
    try:
        with open(out) as handle:
            return proc.returncode, json.load(handle)
    except (OSError, ValueError):
        sys.stderr.write(proc.stdout[-2000:] + proc.stderr[-2000:])
        return proc.returncode, {}


def placement_line(placement: Optional[Dict[str, Any]], provider: str) -> str:
    if not placement:
        return "no placement"
    counts = {p["provider"]: p["nodes"] for p in placement["providers"]}
    total = sum(counts.values())
    on = sum(n for p, n in counts.items() if p.lower().startswith(provider.lower()))
    parts = placement.get("partitions", {})
    accel = sum(n for p, n in parts.items() if p != "CPUExecutionProvider")
    fell = ", ".join(f"{f['node']} ({f['op_type']})" for f in placement["fallback"][:3])
    return f"{on}/{total} on it, {accel} partition(s)" + (f", fell back: {fell}" if fell else "")


def plain_sessions(model: str, provider: str, extra: List[str]) -> Tuple[Any, Any]:
    """A CPU session and a plugin session of `model`, with plain onnxruntime."""
    import onnxruntime as ort

    library = dict(a.split("=", 1) for a in _values(extra, "--ep-library"))
    options: Dict[str, str] = {}
    for text in _values(extra, "--provider-option"):
        name, _, rest = text.partition(":")
        if name.lower() == provider.lower():
            key, _, value = rest.partition("=")
            options[key] = value
    ep_name = None
    if provider in library:
        name, path = provider, library[provider]
    else:
        module = importlib.import_module(PLUGIN_MODULES[provider])
        ep_name = name = module.get_ep_name()
        path = module.get_library_path()
    if name not in REGISTERED:  # once per process, as onnxruntime requires
        ort.register_execution_provider_library(name, path)
        REGISTERED.add(name)
    devices = [d for d in ort.get_ep_devices()
               if (d.ep_name == ep_name) or (ep_name is None and d.ep_name.lower() == f"{provider}executionprovider")]
    plugin_options = ort.SessionOptions()
    plugin_options.add_session_config_entry(RECORD, "1")
    plugin_options.log_severity_level = 3
    plugin_options.add_provider_for_devices(devices[:1], options)
    cpu = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    return cpu, ort.InferenceSession(model, plugin_options)


def _values(args: List[str], flag: str) -> List[str]:
    return [args[i + 1] for i, a in enumerate(args[:-1]) if a == flag]


def plain_metrics(cpu: Any, plugin: Any, data: str) -> Dict[str, Tuple[float, float]]:
    """output -> (max |plugin - cpu|, cosine) over every sample, from the plain sessions."""
    names = [o.name for o in cpu.get_outputs()]
    sums: Dict[str, List[float]] = {n: [0.0, 0.0, 0.0, 0.0] for n in names}
    for path in sorted(glob.glob(os.path.join(data, "*.npz"))):
        feeds = dict(np.load(path))
        feeds = {i.name: feeds[i.name] for i in cpu.get_inputs()}
        for name, a, b in zip(names, cpu.run(names, feeds), plugin.run(names, feeds)):
            a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
            s = sums[name]
            s[0] = max(s[0], float(np.max(np.abs(a - b))))
            s[1] += float(np.sum(a * b))
            s[2] += float(np.sum(a * a))
            s[3] += float(np.sum(b * b))
    return {n: (s[0], s[1] / np.sqrt(s[2] * s[3])) for n, s in sums.items()}


def assignment_counts(session: Any) -> Dict[str, int]:
    counts: Dict[str, int] = {}
    for part in session.get_provider_graph_assignment_info():
        counts[part.ep_name] = counts.get(part.ep_name, 0) + len(part.get_nodes())
    return counts


def check(zoo: str, model: str, provider: str, extra: List[str], work: str) -> None:
    path, data = os.path.join(zoo, model, "fp32.onnx"), os.path.join(zoo, model, "data")
    asked = [f"{provider},cpu"]
    runs = {
        "compare": ["compare", path, path, "--inputs", data, "--b-providers", *asked],
        "compare --layers all": ["compare", path, path, "--inputs", data, "--b-providers", *asked, "--layers", "all"],
        "probe": ["probe", path, "--inputs", data, "--providers", *asked, "--select", "op:MatMul,Conv,Gemm"],
        "nan-bisect": ["nan-bisect", path, "--inputs", data, "--providers", *asked],
        "profile": ["profile", path, "--inputs", data, "--providers", *asked, "--runs", "3", "--warmup", "1"],
    }
    print(f"\n## {model}")
    docs = {}
    for label, args in runs.items():
        code, doc = mi([*args, *extra], os.path.join(work, f"{model}-{label.replace(' ', '_')}.json"))
        docs[label] = doc
        results = doc.get("results", {})
        placement = results.get("placement")
        if isinstance(placement, list):
            placement = placement[-1] if placement else None
        if label == "profile":
            placement = results["profiles"][0]["placement"] if results.get("profiles") else None
        warned = [f["message"] for f in results.get("findings", []) if f.get("rule") == "MI872"]
        note = f"; MI872: {warned[0]}" if warned else ""
        print(f"  {label:22s} exit {code}: {placement_line(placement, provider)}{note}")
    cpu, plugin = plain_sessions(path, provider, extra)
    counts = assignment_counts(plugin)
    print(f"  {'plain onnxruntime':22s} providers {plugin.get_providers()}: assignment {counts}")
    plain = plain_metrics(cpu, plugin, data)
    for output in docs["compare"].get("results", {}).get("outputs", []):
        name, stats = output["name"], output["dataset"]
        mine = (stats.get("max_abs"), stats.get("cosine"))
        theirs = plain.get(name)
        print(f"  output {name}: mi max_abs {mine[0]:.6g} cosine {mine[1]:.9f} | plain max_abs {theirs[0]:.6g} "
              f"cosine {theirs[1]:.9f}")


def main() -> None:
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zoo", default="/work/zoo")
    parser.add_argument("--models", nargs="+", default=["resnet", "bert", "gpt2like"])
    parser.add_argument("--provider", default="openvino")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        for model in args.models:
            check(args.zoo, model, args.provider, extra, work)


if __name__ == "__main__":
    main()
