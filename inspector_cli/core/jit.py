"""Compiled per-tensor kernels (numba), loaded only when a run is large enough to repay them.

Reading every captured tensor of a model is the per-sample cost of `probe --select all` and
`compare --layers`; numpy takes several passes over each tensor (min, max, bucket keys, bincount,
sums ...), a compiled loop one or two. numba compiles such loops (LLVM, shipped in its wheel: no
compiler needed on the user's machine) and caches the machine code on disk, so a process pays its
import (~0.3 s of CPU) and the cache load, not the compilation. Those are a fixed cost: a run uses
the kernels only when its work (values per sample x samples) is above `WORTH_VALUES`, and starts
loading them on a background thread (`prefetch`) while its sessions build.

Every kernel computes exactly what the numpy path computes, to the bit (same elementwise float32
operations in the same order, numpy's pairwise summation reproduced): which path ran never shows in
a result, and the tests run both on the same arrays. numba is optional (the `fast` extra); without
it, or with `MI_JIT=0`, the numpy path runs; `MI_JIT=always` uses the kernels on any run.
"""
from __future__ import annotations

import importlib
import os
import threading
from typing import Any, Dict, Optional

WORTH_VALUES = 64_000_000
"""Tensor values to read over a run (values per sample x samples) from which the compiled kernels
pay for their start-up: ~0.4 s of import and cache load against ~2-4 ns saved per value. They also
cost memory: numba's LLVM adds ~160 MB to the peak RSS (flat in the number of samples), so callers
do not use them on a capture split into chunks by its memory budget."""

_lock = threading.Lock()
_loaded: Dict[str, Optional[Any]] = {}
_threads: Dict[str, threading.Thread] = {}


def _setting() -> str:
    return os.environ.get("MI_JIT", "auto").strip().lower()


def enabled() -> bool:
    """Whether compiled kernels may be used (`MI_JIT=0` turns them off)."""
    return _setting() not in ("0", "false", "no", "off")


def worth(values: int) -> bool:
    """Whether a run reading `values` tensor values in all should use the compiled kernels
    (`MI_JIT=always`: whatever the size, for tests and result comparisons)."""
    return enabled() and (values >= WORTH_VALUES or _setting() == "always")


def _load(module: str) -> Optional[Any]:
    try:
        kernels = importlib.import_module(module)
        kernels.warm()  # compile, or load the cached machine code, now rather than on the first tensor
        return kernels
    except Exception:  # noqa: BLE001 - numba missing or unable to compile here: the numpy path runs
        return None


def prefetch(module: str) -> None:
    """Start loading the kernel module `module` (e.g. "inspector_cli.probe.kernels") in the background."""
    if not enabled():
        return
    from . import background

    with _lock:
        if module in _loaded or module in _threads:
            return
        _threads[module] = background.start(_prefetched, module, name="mi-jit")


def _prefetched(module: str) -> None:
    kernels = _load(module)
    with _lock:
        _loaded[module] = kernels


def kernels(module: str) -> Optional[Any]:
    """The loaded kernel module, or None when numba is unavailable or disabled (waits for a prefetch)."""
    if not enabled():
        return None
    with _lock:
        thread = _threads.get(module)
    if thread is not None:
        thread.join()
    with _lock:
        if module not in _loaded:
            _loaded[module] = _load(module)
        return _loaded[module]
