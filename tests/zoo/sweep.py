"""Runs every mi command on a zoo model and variant from the installed wheel, memoised per command line,
and keeps the facts the results table needs (exit code, seconds, pairing, isolation, truth)."""
from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from .wheel import clean_env

QUANTISED = ("qdq_u8u8", "qdq_s8s8_pc", "qop", "dynamic", "int4")
QUANT_OPS = ("qdq_u8u8", "qdq_s8s8_pc", "qop")   # have QuantizeLinear / QLinear ops for --quant-ranges
NAN_VARIANTS = ("nan_weight", "nan_late")         # decoders with one NaN weight (scripts/zoolib/decoders.py)
DECODE_STEPS = 16


@dataclass
class Run:
    """One mi invocation."""

    model: str
    variant: str
    command: str
    argv: List[str]
    rc: int
    seconds: float
    stderr_tail: str
    traceback: bool
    json_path: Optional[str] = None
    html_path: Optional[str] = None


@dataclass
class Sweep:
    """mi from `bin_dir` on the zoo in `zoo`, reports written under `out`."""

    bin_dir: Path
    zoo: Path
    out: Path
    runs: Dict[Tuple[str, str, str], Run] = field(default_factory=dict)
    facts: Dict[Tuple[str, str], Dict[str, object]] = field(default_factory=dict)
    jobs: int = field(default_factory=lambda: max(1, int(os.environ.get("MI_ZOO_JOBS", "2"))))
    """mi processes run at once by `commands` (MI_ZOO_JOBS; 1 for the seconds of an unloaded run): much
    of a short mi run is single-threaded Python, so two at a time nearly halve the sweep on two cores."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    extras: Dict[str, Callable[[], Path]] = field(default_factory=dict, repr=False)
    """extra name -> a function installing the wheel with that extra into its own venv (its bin folder):
    what a feature needing an optional dependency runs from (`mi(..., extra=...)`)."""
    _extra_bins: Dict[str, Path] = field(default_factory=dict, repr=False)

    def reuse(self) -> int:
        """Load the runs of a previous session (runs.jsonl in `out`) instead of running them again: for
        re-checking the criteria or the known-defect table without the mi runs (MI_ZOO_REUSE=1)."""
        path = self.out / "runs.jsonl"
        if path.exists():
            for line in path.read_text().splitlines():
                run = Run(**json.loads(line))
                self.runs[(run.model, run.variant, run.command)] = run
        return len(self.runs)

    def manifest(self, model: str) -> Dict[str, object]:
        return json.loads((self.zoo / model / "manifest.json").read_text())

    def path(self, model: str, variant: str) -> Path:
        """`<model>/<variant>.onnx`, or the tool's own folder `<model>/<variant>/model.onnx` (onnxruntime-genai's
        builder members: model.onnx beside its data, genai_config.json and tokenizer, as the Generator loads it)."""
        folder = self.zoo / model / variant
        if (folder / "model.onnx").exists():
            return folder / "model.onnx"
        return self.zoo / model / f"{variant}.onnx"

    def skipped(self, model: str, variant: str) -> Optional[str]:
        """Why the zoo has no such variant (the tool that makes it refused the model), or None."""
        m = self.manifest(model)
        if m.get("unavailable"):  # the member's exporter is not installed where the zoo was built
            return m["unavailable"]
        if variant == "fp32":
            return None
        if variant in m.get("variants", {}):
            return None
        return m.get("skipped", {}).get(variant, "not built")

    def bin_for(self, extra: str = "") -> Path:
        """The bin folder of the core-only venv, or of the venv with `extra` installed (made on first use)."""
        if not extra:
            return self.bin_dir
        with self._lock:
            if extra not in self._extra_bins:
                self._extra_bins[extra] = self.extras[extra]()
            return self._extra_bins[extra]

    def mi(self, model: str, variant: str, command: str, args: List[str], *, json_out: bool = True,
           html: bool = True, extra: str = "") -> Run:
        """Run `mi <args>` once per (model, variant, command); later calls return the recorded run."""
        key = (model, variant, command)
        if key in self.runs:
            return self.runs[key]
        folder = self.out / model / variant
        folder.mkdir(parents=True, exist_ok=True)
        argv = [str(self.bin_for(extra) / "mi"), *map(str, args)]
        j = folder / f"{command}.json" if json_out else None
        h = folder / f"{command}.html" if html else None
        argv += (["--json", str(j)] if j else []) + (["--html", str(h)] if h else [])
        env = {**clean_env(), "NO_COLOR": "1", "COLUMNS": "200"}  # the wheel's mi, not the checkout's
        start = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=folder, timeout=900)
        run = Run(model, variant, command, argv, proc.returncode, round(time.perf_counter() - start, 2),
                  proc.stderr[-1500:], "Traceback (most recent call last)" in proc.stderr + proc.stdout,
                  str(j) if j and j.exists() else None, str(h) if h and h.exists() else None)
        with self._lock:  # `commands` runs several at once
            self.runs[key] = run
            with open(self.out / "runs.jsonl", "a") as f:
                f.write(json.dumps(asdict(run)) + "\n")
        return run

    # ---- the commands of the sweep
    def compare(self, model: str, variant: str, opt: str = "default") -> Run:
        """compare fp32 VARIANT --layers all --isolate all (default level), or at `--opt-level disable`."""
        data, a, b = self.zoo / model / "data", self.path(model, "fp32"), self.path(model, variant)
        args = ["compare", a, b, "--inputs", data, "--layers", "all"]
        if opt == "default":
            return self.mi(model, variant, "compare", args + ["--isolate", "all"])
        return self.mi(model, variant, "compare-disable", args + ["--opt-level", "disable"], html=False)

    def data(self, model: str, variant: str) -> Path:
        """The samples for one model of the pair: as saved, or cast to float16 for an fp16 model without
        keep_io_types (its users feed it float16; compare casts for it by itself)."""
        src = self.zoo / model / "data"
        if variant != "fp16":
            return src
        import numpy as np
        dst = self.out / model / "data_fp16"
        if not dst.exists():
            dst.mkdir(parents=True)
            for f in sorted(src.glob("*.npz")):
                with np.load(f, allow_pickle=False) as z:
                    arrays = {k: z[k].astype(np.float16) if z[k].dtype == np.float32 else z[k] for k in z.files}
                np.savez(dst / f.name, **arrays)
        return dst

    def is_decoder(self, model: str) -> bool:
        """A KV-cache decoder with decode prompts (the *_optimum and *_genai members)."""
        return (self.zoo / model / "prompts.json").exists()

    def decode(self, model: str, variant: str, teacher_forced: bool = False) -> Run:
        """compare fp32 VARIANT --decode --prompt prompts.json --steps 16 (free-running or teacher-forced),
        with the per-step journal (for the per-step cosines) and, for the NaN copies, --repro."""
        command = "decode-tf" if teacher_forced else "decode"
        folder = self.out / model / variant
        folder.mkdir(parents=True, exist_ok=True)
        journal = folder / f"{command}.jsonl"
        if (model, variant, command) not in self.runs:
            journal.unlink(missing_ok=True)
        args = ["compare", self.path(model, "fp32"), self.path(model, variant), "--decode", "--prompt",
                self.zoo / model / "prompts.json", "--steps", str(DECODE_STEPS), "--jsonl", journal]
        args += ["--teacher-forced"] if teacher_forced else ["--repro", folder / "repro"]
        return self.mi(model, variant, command, args)

    def nan_bisect_step(self, model: str, variant: str) -> Optional[Run]:
        """nan-bisect VARIANT on the bundle of the decode's first non-finite step (None: no bundle)."""
        bundles = sorted((self.out / model / variant / "repro").glob("step_*/inputs.npz"))
        if not bundles:
            return None
        return self.mi(model, variant, "nan-bisect-step", ["nan-bisect", self.path(model, variant), "--inputs",
                                                            bundles[0]])

    def probe_step(self, model: str, variant: str) -> Optional[Run]:
        """probe VARIANT on the same bundle (the first tensor it names holding NaN is the origin's output)."""
        bundles = sorted((self.out / model / variant / "repro").glob("step_*/inputs.npz"))
        if not bundles:
            return None
        return self.mi(model, variant, "probe-step", ["probe", self.path(model, variant), "--inputs", bundles[0],
                                                       "--select", "all", "--no-history"])

    def commands(self, model: str, variant: str) -> List[Run]:
        """Every command of the sweep on this model and variant."""
        data, fp32, m = self.data(model, variant), self.path(model, "fp32"), self.path(model, variant)
        steps: List[Callable[[], Run]] = [lambda: self.compare(model, variant)]
        if variant in QUANTISED:
            steps.append(lambda: self.compare(model, variant, "disable"))
        steps.append(lambda: self.probe(model, variant))
        if variant in QUANT_OPS:
            steps.append(lambda: self.mi(model, variant, "probe-quant", ["probe", m, "--inputs", data,
                                                                          "--quant-ranges", "--reference", fp32,
                                                                          "--no-history"]))
        steps.append(lambda: self.mi(model, variant, "nan-bisect", ["nan-bisect", m, "--inputs", data]))
        steps.append(lambda: self.mi(model, variant, "validate", ["validate", m] + (["--against", fp32]
                                                                                  if variant != "fp32" else [])))
        steps.append(lambda: self.profile(model, variant))
        if self.is_decoder(model):
            seq = self.zoo / model / "steps"  # per-step input_ids/attention_mask/position_ids, caches wired
            steps.append(lambda: self.decode(model, variant))
            steps.append(lambda: self.decode(model, variant, teacher_forced=True))
            steps.append(lambda: self.mi(model, variant, "compare-seq", ["compare", fp32, m, "--sequence", seq]))
            steps.append(lambda: self.mi(model, variant, "nan-bisect-seq", ["nan-bisect", m, "--sequence", seq]))
            steps.append(lambda: self.mi(model, variant, "probe-seq", ["probe", m, "--sequence", seq, "--select",
                                                                        "all", "--no-history"]))
        # independent runs, in the order above whatever order they finish in
        with ThreadPoolExecutor(max_workers=self.jobs) as pool:
            runs = list(pool.map(lambda step: step(), steps))
        if runs[0].json_path:  # reads compare's report: after it
            runs.append(self.mi(model, variant, "report", ["report", runs[0].json_path], json_out=False))
        if self.is_decoder(model) and variant in NAN_VARIANTS:  # reads the decode's --repro bundle: after it
            runs += [r for r in (self.nan_bisect_step(model, variant), self.probe_step(model, variant)) if r]
        return runs

    def probe(self, model: str, variant: str) -> Run:
        """probe VARIANT --select all over the samples."""
        return self.mi(model, variant, "probe", ["probe", self.path(model, variant), "--inputs",
                                                 self.data(model, variant), "--select", "all", "--no-history"])

    def profile(self, model: str, variant: str) -> Run:
        """profile fp32 --against VARIANT over the samples."""
        return self.mi(model, variant, "profile", ["profile", self.path(model, "fp32"), "--against",
                                                   self.path(model, variant), "--inputs", self.zoo / model / "data",
                                                   "--runs", "3", "--warmup", "1"])

    def probe_list(self, model: str, variant: str) -> Run:
        """probe VARIANT --list: every selectable tensor, no inference."""
        return self.mi(model, variant, "probe-list", ["probe", self.path(model, variant), "--list", "--no-history"],
                       html=False)

    def profile_without_inputs(self, model: str) -> Run:
        """`mi profile fp32.onnx` with synthetic inputs, as the ci-gate suite's profile step runs it."""
        return self.mi(model, "fp32", "profile-synthetic", ["profile", self.path(model, "fp32"), "--runs", "2",
                                                             "--warmup", "1"], html=False)


def layers_doc(run: Run) -> Dict[str, object]:
    """`results.layers` of a compare run's JSON ({} when there is none)."""
    if not run.json_path:
        return {}
    return json.loads(Path(run.json_path).read_text())["results"].get("layers") or {}


def pairing_counts(run: Run) -> Tuple[int, int, int]:
    """(layers paired, tensors of A unpaired, of B unpaired) of a compare run."""
    doc = layers_doc(run)
    return len(doc.get("layers", [])), len(doc.get("unpaired_a", [])), len(doc.get("unpaired_b", []))


def isolation_share(run: Run) -> Tuple[Optional[float], Dict[str, int]]:
    """Share of paired layers isolated, and the skip reasons with their counts. Model inputs do not count:
    they have no producing subgraph, so nothing of their own to isolate."""
    doc = layers_doc(run)
    layers = [L for L in doc.get("layers", []) if L.get("op_a") != "input"]
    if not layers:
        return None, {}
    iso = doc.get("isolation") or {}
    isolated = sum(1 for L in layers if L.get("isolated") is not None)
    reasons: Dict[str, int] = {}
    for name, reason in (iso.get("skipped") or {}).items():
        if any(L["name"] == name for L in layers):
            reasons[reason] = reasons.get(reason, 0) + 1
    return isolated / len(layers), reasons
