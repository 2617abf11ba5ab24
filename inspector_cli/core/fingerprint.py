"""The environment that produced a result: versions, onnxruntime build, CPU kernel flags, threads, OS.

"The outputs moved after an upgrade" is answered by diffing two fingerprints, so every field is a
plain string, number or list (JSON-ready) and absent facts are None, never guessed.
"""
from __future__ import annotations

import os
import platform
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

CPU_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni",
             "avx512_bf16", "avx512_fp16", "amx_tile", "amx_int8", "amx_bf16", "asimd", "asimddp", "i8mm")
"""Flags that decide which kernels onnxruntime picks (VNNI: int8 dot products without u8s8 saturation)."""
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "ORT_NUM_THREADS")


def _version(module: str) -> Optional[str]:
    found = _dist_info_version(module)
    if found is not None:
        return found
    try:
        from importlib.metadata import version

        return version(module)
    except Exception:  # not installed, or no metadata
        return None


def _dist_info_version(module: str) -> Optional[str]:
    """The `Version:` of the one `<name>-*.dist-info` found first on sys.path, as
    `importlib.metadata.version` finds it; None when that search is not this simple (several
    matches in one folder, an .egg-info, no folder) and the caller asks importlib.metadata, whose
    import (email, zipfile, csv ...) cost ~60 ms of CPU in every process that wrote a result."""
    wanted = module.replace("-", "_").replace(".", "_").lower()
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        matches = [n for n in names if n.lower().endswith((".dist-info", ".egg-info"))
                   and n.split("-", 1)[0].replace(".", "_").lower() == wanted]
        if not matches:
            continue
        if len(matches) > 1 or not matches[0].endswith(".dist-info"):
            return None
        try:
            with open(os.path.join(entry or ".", matches[0], "METADATA"), encoding="utf-8") as handle:
                for line in handle:
                    if not line.strip():
                        return None  # end of the headers: no Version
                    if line.startswith("Version:"):
                        return line[len("Version:"):].strip() or None
        except OSError:
            return None
        return None
    return None


def read_cpuinfo(path: "str | Path" = "/proc/cpuinfo") -> Dict[str, Any]:
    """CPU model and the kernel-relevant flags from a /proc/cpuinfo text (Linux); empty elsewhere."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return {"model": platform.processor() or None, "flags": []}
    model: Optional[str] = None
    flags: List[str] = []
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("model name", "hardware", "cpu model") and model is None:
            model = value.strip() or None
        elif key in ("flags", "features") and not flags:
            present = set(value.split())
            flags = [f for f in CPU_FLAGS if f in present]
    return {"model": model, "flags": flags}


def _onnxruntime_build() -> Dict[str, Any]:
    try:
        import onnxruntime as ort
    except Exception:  # fingerprints are also taken where onnxruntime is absent (`mi report`)
        return {"version": None, "providers": [], "build": None}
    build = getattr(ort, "get_build_info", lambda: None)()
    return {"version": ort.__version__, "providers": list(ort.get_available_providers()),
            "device": ort.get_device(), "build": build, **_plugin_facts(ort)}


def _plugin_facts(ort: Any) -> Dict[str, Any]:
    """The plugin provider packages installed beside onnxruntime (found on disk, nothing imported) and
    the devices of the providers registered in this process (core/plugin_eps.py)."""
    from .plugin_eps import installed_plugins
    from .providers import device_facts

    plugins = [{"package": p.distribution or p.module, "version": p.version, "module": p.module}
               for p in installed_plugins()]
    devices = [{"provider": d.ep_name, **device_facts(d)} for d in getattr(ort, "get_ep_devices", list)()]
    return {"plugins": plugins, "ep_devices": devices}


def run_fingerprint(intra_op_threads: Optional[int] = None, inter_op_threads: Optional[int] = None,
                    cpuinfo_path: "str | Path" = "/proc/cpuinfo") -> Dict[str, Any]:
    """The environment of this process as a JSON-ready dict (see module docstring)."""
    from ..version import __version__

    try:
        affinity: Optional[int] = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    return {
        "mi": __version__,
        "python": platform.python_version(),
        "onnxruntime": _onnxruntime_build(),
        "onnx": _version("onnx"),
        "numpy": _version("numpy"),
        "cpu": read_cpuinfo(cpuinfo_path),
        "threads": {"cpu_count": os.cpu_count(), "affinity": affinity, "intra_op": intra_op_threads,
                    "inter_op": inter_op_threads,
                    "env": {k: os.environ[k] for k in THREAD_ENV if k in os.environ}},
        "os": {"system": platform.system(), "release": platform.release(), "machine": platform.machine(),
               "implementation": sys.implementation.name},
    }


def diff_fingerprints(old: Dict[str, Any], new: Dict[str, Any], prefix: str = "") -> List[Dict[str, Any]]:
    """Changed leaves of two fingerprints as [{"key": "onnxruntime.version", "old": ..., "new": ...}]."""
    changes: List[Dict[str, Any]] = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        path = f"{prefix}{key}"
        if isinstance(a, dict) and isinstance(b, dict):
            changes.extend(diff_fingerprints(a, b, path + "."))
        elif a != b:
            changes.append({"key": path, "old": a, "new": b})
    return changes
