"""How the provider tests reach a real OpenVINO provider and the QNN plugin in the venv they run in.

OpenVINO comes three ways: built into a replacement build (`onnxruntime-openvino`, the legacy way),
or as the plugin package `onnxruntime-ep-openvino` beside the stock onnxruntime, found by mi without
configuration. The plugin offers Intel devices only: on another vendor's CPU it registers and offers
none. There the tests register the same plugin through `ov_vendor_shim.c` (built here with the
system's C compiler, `--ep-library openvino=SHIM`), which hands the plugin onnxruntime's API with the
CPU's vendor id read as Intel's: every other call is the real plugin's and the real onnxruntime's
(OpenVINO's CPU plugin itself runs on any x86-64 CPU, as the replacement build shows).
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import List, Optional, Tuple

OV = "OpenVINOExecutionProvider"
QNN = "QNNExecutionProvider"
SHIM_SOURCE = Path(__file__).with_name("ov_vendor_shim.c")


def _module_file(module: str) -> Optional[str]:
    import importlib.util

    spec = importlib.util.find_spec(module)
    return spec.origin if spec is not None else None


@functools.lru_cache(maxsize=1)
def openvino_route() -> Tuple[Optional[str], List[str]]:
    """(how, extra mi arguments): 'legacy', 'plugin' or 'plugin+shim'; (None, reason) when none here."""
    import onnxruntime as ort

    if OV in ort.get_available_providers():
        return "legacy", []
    if _module_file("onnxruntime_ep_openvino") is None or not hasattr(ort, "get_ep_devices"):
        return None, ["neither onnxruntime-openvino nor onnxruntime-ep-openvino is installed"]
    if _plugin_offers_a_device():
        return "plugin", []
    shim = _build_shim()
    if shim is None:
        return None, ["onnxruntime-ep-openvino offers no device on this CPU and no C compiler builds the shim"]
    return "plugin+shim", ["--ep-library", f"openvino={shim}"]


def _plugin_offers_a_device() -> bool:
    """Asked in a child process: registering a library in this one would change what mi finds."""
    code = ("import onnxruntime as o, onnxruntime_ep_openvino as p\n"
            "o.register_execution_provider_library(p.get_ep_name(), p.get_library_path())\n"
            "print(any(d.ep_name == p.get_ep_name() for d in o.get_ep_devices()))")
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return out.stdout.strip().endswith("True")


def _build_shim() -> Optional[str]:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    import onnxruntime_ep_openvino

    folder = Path(tempfile.mkdtemp(prefix="mi-ov-shim-"))
    shim = folder / "libov_vendor_shim.so"
    subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", str(shim), str(SHIM_SOURCE), "-ldl"], check=True)
    # read by the shim in every process that registers it (mi's workers and subprocesses inherit it)
    os.environ["OV_PLUGIN_LIBRARY"] = onnxruntime_ep_openvino.get_library_path()
    return str(shim)


def has_qnn_plugin() -> bool:
    return _module_file("onnxruntime_qnn") is not None
