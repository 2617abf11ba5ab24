"""The model as the search runs it: weights on disk, cheap re-serialisation, sessions on demand.

A search opens several sessions over the same model (the scan with checkpoints exposed, replays of
spans). With weights embedded in the proto each one would serialise and copy every weight, and
the Python proto would sit in memory next to onnxruntime's copy. So a model with large embedded
weights is *externalised* once: its weights are written to a temporary folder and the graph kept
in memory is the weightless proto, whose external data onnxruntime reads from that folder.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Dict, Mapping, Optional, Sequence, Tuple

import numpy as np
import onnx
from onnx import numpy_helper

from ..core.types import tensor_shapes
from ..core.capture import estimate_sizes
from ..core.expose import extract_subgraph, serialized_with_outputs
from ..core.graph import ModelGraph, load_model
from ..core.runner import SPIN_STOP as SPIN_STOP  # re-exported: the scan sessions' setting
from ..core.runner import RuntimeConfig, Session
from ..core.weights import initializer_array
from .regions import Region, Topology

EXTERNALISE_BYTES = 32 << 20
"""Embedded weights above this size are moved to a temporary folder before sessions open."""
INLINE_BYTES = 1024
"""Initializers up to this size stay in the proto (shape inputs of Reshape etc. feed shape inference)."""
WEIGHTS_FILE = "weights.bin"


def scan_runtime(runtime: RuntimeConfig) -> RuntimeConfig:
    """The runtime of the scan sessions: idle threads stop spinning at the end of each run, unless
    the user chose a spinning setting.

    Between two scans `mi` checks outputs and reads the next sample, and a bad sample's replays run
    on one thread: onnxruntime's spinning threads burned ~30% of a core through all of it (58 ms of
    CPU over a 200 ms pause of the encoder's session), and took the other core from a replay
    session built in the background. Back-to-back runs cost the same either way; values are the
    same (spinning only decides how idle threads wait)."""
    return runtime.spinning_only_in_runs()


def embedded_weight_bytes(model: onnx.ModelProto) -> int:
    return sum(len(t.raw_data) for t in model.graph.initializer if t.data_location != onnx.TensorProto.EXTERNAL)


def externalise(graph: ModelGraph, folder: Path) -> Path:
    """Write `graph` to `folder/model.onnx` with its large embedded weights in `folder/weights.bin`.

    The proto is edited on a copy-free path: each initializer's bytes are written out and replaced
    by a reference. Returns the new model path (load it with `load_model`).
    """
    model = graph.model
    target = folder / "model.onnx"
    offset = 0
    with open(folder / WEIGHTS_FILE, "wb") as handle:
        for tensor in model.graph.initializer:
            if tensor.data_location == onnx.TensorProto.EXTERNAL:
                continue
            data = tensor.raw_data if tensor.HasField("raw_data") else None
            if data is None:
                if tensor.ByteSize() <= INLINE_BYTES:
                    continue
                data = numpy_helper.to_array(tensor).tobytes()
            if len(data) <= INLINE_BYTES:
                continue
            pad = (-offset) % 4096  # page-aligned, so onnxruntime may map it
            handle.write(b"\0" * pad)
            offset += pad
            handle.write(data)
            for name in ("raw_data", "float_data", "int32_data", "int64_data", "double_data", "uint64_data"):
                tensor.ClearField(name)
            del tensor.external_data[:]
            for key, value in (("location", WEIGHTS_FILE), ("offset", str(offset)), ("length", str(len(data)))):
                entry = tensor.external_data.add()
                entry.key, entry.value = key, value
            tensor.data_location = onnx.TensorProto.EXTERNAL
            offset += len(data)
    with open(target, "wb") as handle:
        handle.write(model.SerializeToString())
    return target


class PreparedModel:
    """A graph ready for repeated exposure and span replay, with size estimates per input shape."""

    def __init__(self, graph: ModelGraph, runtime: RuntimeConfig, *, workdir: Optional[str] = None,
                 label: Optional[str] = None, owns_workdir: bool = False) -> None:
        self.runtime = runtime
        self.graph = graph
        self.label = label or graph.display_name
        self.topo = Topology(graph)
        self.workdir = workdir
        self._owns_workdir = owns_workdir
        self._sizes: Dict[Tuple[Tuple[str, Tuple[int, ...]], ...], Dict[str, int]] = {}
        self._initializers: Dict[str, Optional[np.ndarray]] = {}
        self._init_names = set(graph.initializer_names)
        self.external_dir = graph.folder.resolve() if graph.folder is not None and graph.uses_external_data else None
        self.preopened: Dict[object, Session] = {}
        """Sessions opened before the search (the load check's root session), taken by the first `Locator`."""
        self.root_build_seconds: Optional[float] = None
        """CPU seconds (the building thread's) of the preopened root session: a replay build's estimate."""

    @classmethod
    def load(cls, graph: ModelGraph, runtime: RuntimeConfig,
             externalise_above: int = EXTERNALISE_BYTES) -> "PreparedModel":
        """Prepare `graph`, externalising its weights when they are large (the input graph's proto is
        edited: do not use it afterwards)."""
        if embedded_weight_bytes(graph.model) <= externalise_above:
            return cls(graph, runtime)
        workdir = tempfile.mkdtemp(prefix="mi-nan-bisect-")
        path = externalise(graph, Path(workdir))
        return cls(load_model(path), runtime, workdir=workdir, label=graph.display_name, owns_workdir=True)

    @property
    def run_path(self) -> Optional[str]:
        """The path worker processes load (the externalised copy when there is one)."""
        path = self.graph.path
        return str(path) if path is not None else None

    def close(self) -> None:
        if self._owns_workdir and self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self._owns_workdir = False

    # ---- sizes ------------------------------------------------------------------------------------
    def sizes(self, feeds: Mapping[str, np.ndarray]) -> Dict[str, int]:
        """Bytes of every computed tensor for samples shaped like `feeds` (unknown: largest known)."""
        key = tuple(sorted(tensor_shapes(feeds).items()))
        if key not in self._sizes:
            names = list(self.topo.position)
            declared = {i.name: i.shape for i in self.graph.inputs}
            static = all(declared.get(k) == shape for k, shape in key)
            raw = estimate_sizes(self.graph, names, None if static else dict(key))
            known = [s for s in raw if s is not None]
            fallback = max(known) if known else 1 << 20
            self._sizes[key] = {n: (s if s is not None else fallback) for n, s in zip(names, raw)}
        return self._sizes[key]

    # ---- values -------------------------------------------------------------------------------------
    def initializer(self, name: str) -> Optional[np.ndarray]:
        if name not in self._initializers:
            proto = self.graph.initializer(name)
            self._initializers[name] = initializer_array(self.graph, proto) if proto is not None else None
        return self._initializers[name]

    def is_initializer(self, name: str) -> bool:
        return name in self._init_names

    # ---- sessions -----------------------------------------------------------------------------------
    def open_full(self, exposed: Sequence[str], label: str = "scan") -> Session:
        """The whole model, its outputs kept and `exposed` added."""
        data = serialized_with_outputs(self.graph, list(exposed), keep_original=True)
        return Session(data, scan_runtime(self.runtime), label=f"{self.label} ({label})",
                       external_dir=self.external_dir)

    def open_region(self, region: Region, exposed: Sequence[str]) -> Session:
        """A span replayed from its captured feeds, computing its targets and `exposed`.

        A replay session runs once or twice (a bad sample's walk), so unless the user set a thread
        count it gets one intra-op thread: starting onnxruntime's thread pool cost more than the
        second thread saved (session 0.31 -> 0.12 s on MobileNetV2 under load; values bit-identical
        on the bench models: the CPU kernels split work by output, not by reduction)."""
        outputs = list(dict.fromkeys([*region.targets, *exposed]))
        model = extract_subgraph(self.graph, list(region.feeds), outputs, name="mi_nan_bisect_span")
        runtime = self.runtime if self.runtime.intra_op_threads else self.runtime.replace(intra_op_threads=1)
        return Session(model.SerializeToString(), runtime,
                       label=f"{self.label} (span of {len(region.positions)} nodes)",
                       external_dir=self.external_dir)
