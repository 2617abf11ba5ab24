"""Running a session over many samples into the same output arrays.

`Session.run` returns fresh numpy arrays on every call; with dozens of exposed tensors that is
dozens of allocations per sample, and on virtual machines the page faults of fresh memory cost
more than the copy. A `BoundRunner` binds every output once to an array it keeps (onnxruntime
IOBinding) and reuses those arrays for every sample: the arrays handed out are overwritten by the
next run, so callers reduce them before asking for the next sample.
"""
from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..errors import InferenceError
from . import elemtypes, failpoints
from .runner import Session, _first_line
from .types import TensorMap

_BINDABLE = (np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64,
             np.float16, np.float32, np.float64)


class BoundRunner:
    """Runs `session` for `names`, writing outputs into arrays reused from sample to sample.

    With `sets=2` two sets of arrays alternate, so a consumer may still read one sample's arrays
    (in another thread) while the next sample runs into the other set.
    """

    def __init__(self, session: Session, names: Sequence[str], *, reuse: bool = True, sets: int = 1) -> None:
        self.session = session
        self.names = list(dict.fromkeys(names))
        self.reuse = reuse
        self.sets = max(1, sets)
        self._all: List[Tuple[Dict[str, np.ndarray], object]] = []
        self._buffers: Optional[Dict[str, np.ndarray]] = None
        self._binding = None
        self._shapes: Dict[str, Tuple[int, ...]] = {}
        self._base = 0
        """Run count when the sets were made: set 0 holds that run's outputs, the next run uses set 1."""
        self.runs = 0

    def run(self, feeds: Mapping[str, np.ndarray], sample: str = "") -> TensorMap:
        failpoints.hit("capture")
        self.runs += 1
        if not self.reuse:
            return self.session.run(feeds, self.names, sample=sample)
        # .shape of an array directly: np.shape is a Python-level call, and this runs every sample
        shapes = {name: value.shape if isinstance(value, np.ndarray) else np.shape(value) for name, value in feeds.items()}
        if not self._all or shapes != self._shapes:
            # first sample, or other input shapes (dynamic axes): outputs change size, bind anew
            outputs = self.session.run(feeds, self.names, sample=sample)
            self._shapes = shapes
            self._prepare(outputs)
            if any(elemtypes.is_typed(v) for v in feeds.values()):
                self.reuse = False  # bfloat16/float8/int4 feeds go in as typed OrtValues (Session.run)
            return outputs
        self._buffers, self._binding = self._all[(self.runs - self._base) % len(self._all)]
        try:
            return self._run_bound(feeds)
        except _ShapeChanged:
            outputs = self.session.run(feeds, self.names, sample=sample)
            self._prepare(outputs)  # dynamic shapes: bind again at the new sizes
            return outputs
        except Exception as exc:
            where = f" on sample {sample}" if sample else ""
            raise InferenceError(f"{self.session.label}: inference failed{where}: {_first_line(exc)}") from exc

    def _prepare(self, outputs: TensorMap) -> None:
        if any(not isinstance(v, np.ndarray) or v.dtype.type not in _BINDABLE for v in outputs.values()):
            self.reuse = False  # strings, sequences, maps: onnxruntime must allocate them
            return
        self._all = []
        self._base = self.runs
        reusable = _reusable(outputs)
        for index in range(self.sets):
            # The first set is the arrays onnxruntime just returned: binding them costs no memory.
            buffers = {name: value if index == 0 and name in reusable else np.empty_like(value)
                       for name, value in outputs.items()}
            binding = self.session.ort_session.io_binding()
            for name, buffer in buffers.items():
                binding.bind_output(name, "cpu", 0, buffer.dtype, list(buffer.shape), buffer.ctypes.data)
            self._all.append((buffers, binding))

    def _run_bound(self, feeds: Mapping[str, np.ndarray]) -> TensorMap:
        binding = self._binding
        assert binding is not None and self._buffers is not None
        for name, value in feeds.items():
            binding.bind_cpu_input(name, np.ascontiguousarray(value))
        try:
            self.session.ort_session.run_with_iobinding(binding)
        except Exception as exc:
            if "shape" in str(exc).lower():
                raise _ShapeChanged() from exc
            raise
        return dict(self._buffers)


def _reusable(outputs: TensorMap) -> "set[str]":
    """Outputs whose arrays can be bound as the first buffer set: contiguous, writable, and either
    owning their memory or holding onnxruntime's (the arrays `run` returns wrap the output OrtValue:
    their base is a capsule that keeps it alive, not another array), and overlapping no other output.
    Requiring `owndata` refused every onnxruntime array, and each first set was allocated again
    (MobileNetV2: +26 MiB of peak memory while the first sample's arrays were still being read)."""
    spans = []
    for name, value in outputs.items():
        flags = value.flags
        if flags.c_contiguous and flags.writeable and (flags.owndata or not isinstance(value.base, np.ndarray)):
            start = value.ctypes.data
            spans.append((start, start + max(1, value.nbytes), name))
    spans.sort()
    overlapping = set()
    reach, reach_name = -1, ""  # the furthest end of the spans so far, and whose it is
    for start, end, name in spans:
        # sorted by start: a span overlaps an earlier one exactly when it starts before the furthest
        # end so far (comparing neighbours only missed [0,100) against [30,40) behind [10,20))
        if start < reach:
            overlapping.update((name, reach_name))
        if end > reach:
            reach, reach_name = end, name
    return {name for _start, _end, name in spans if name not in overlapping}


class _ShapeChanged(Exception):
    pass
