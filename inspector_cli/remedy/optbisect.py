"""Which onnxruntime graph transformer(s) change a model's outputs between two session settings.

The transformers that actually rewrote this model are read from onnxruntime's own log (severity
INFO prints "GraphTransformer <name> modified: 1"), captured at the file-descriptor level because
onnxruntime logs from C++. Then the set is halved over disabled transformers (session config
`optimization.disable_specified_optimizers`, the same as `InferenceSession(disabled_optimizers=...)`):
with k of the T applied transformers enabled, do B's outputs still differ from A's? One culprit
costs at most 2 builds per halving (2*log2(T) + 2 with the two reference builds); when neither half
alone changes the outputs, each half is minimised with the other enabled ("needs A and B together").
The nodes a culprit rewrote come from the optimised graph with only the culprits enabled, diffed
against the model's own graph.
"""
from __future__ import annotations

import contextlib
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple

import numpy as np
import onnx

from ..core.runner import RuntimeConfig, Session
from ..core.types import TensorMap
from ..diff.values import is_numeric_tensor, numeric_leaves, reduce_values
from ..results.remedy import OptimizerSection

_MODIFIED = re.compile(r"GraphTransformer (\S+) modified: (\d+)")


@contextlib.contextmanager
def _captured_stderr() -> Iterator[List[str]]:
    """Lines written to file descriptor 2 (by C++ code too) while the block runs."""
    lines: List[str] = []
    with tempfile.TemporaryFile(mode="w+b") as sink:
        saved = os.dup(2)
        try:
            os.dup2(sink.fileno(), 2)
            yield lines
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            lines.extend(sink.read().decode("utf-8", "replace").splitlines())


DISABLE_KEY = "optimization.disable_specified_optimizers"
"""The session config entry equivalent to `InferenceSession(disabled_optimizers=...)`; names are
separated by ";" (onnxruntime 1.32 takes "A,B" as one unknown name and disables nothing)."""


def with_disabled_optimizers(runtime: RuntimeConfig, disabled: Sequence[str]) -> RuntimeConfig:
    """`runtime` with onnxruntime's graph transformers `disabled` (no change when empty); usable by
    any caller of core.runner, e.g. to re-check a model without the pass the bisection named."""
    if not disabled:
        return runtime
    entries = tuple((k, v) for k, v in runtime.session_config if k != DISABLE_KEY)
    return runtime.replace(session_config=entries + ((DISABLE_KEY, ";".join(disabled)),))


def minimise(candidates: List[str], fixed: List[str], differs: Callable[[List[str]], bool]) -> List[str]:
    """A minimal subset of `candidates` that, with `fixed` enabled, still changes the outputs.

    `differs(enabled)` answers for one set of enabled transformers (one session build). Halving:
    one culprit costs at most 2 calls per level; when neither half alone differs, each half is
    minimised with the other (then the first's culprits) enabled.
    """
    if len(candidates) <= 1:
        return list(candidates)
    half = len(candidates) // 2
    first, second = candidates[:half], candidates[half:]
    if differs(fixed + first):
        return minimise(first, fixed, differs)
    if differs(fixed + second):
        return minimise(second, fixed, differs)
    found_first = minimise(first, fixed + second, differs)
    return found_first + minimise(second, fixed + found_first, differs)


class _Bisector:
    def __init__(self, model: bytes, samples: Sequence[TensorMap], a: RuntimeConfig, b: RuntimeConfig,
                 atol: float, rtol: float, workdir: Path) -> None:
        self.model, self.samples, self.b = model, samples, b
        self.atol, self.rtol, self.workdir = atol, rtol, workdir
        self.builds = 0
        self.applied: List[str] = []
        self.trials: List[Dict[str, Any]] = []
        self.graphs: Dict[frozenset, Path] = {}
        self.reference = self._outputs(a, (), log=False, save=None)

    def _outputs(self, runtime: RuntimeConfig, disabled: Sequence[str], log: bool,
                 save: Optional[Path]) -> List[TensorMap]:
        def hook(options: Any) -> None:
            if log:
                options.log_severity_level = 1
            if save is not None:
                options.optimized_model_filepath = str(save)

        self.builds += 1
        if log:
            with _captured_stderr() as lines:
                session = self._session(runtime, disabled, hook)
            for line in lines:
                match = _MODIFIED.search(line)
                if match and int(match.group(2)) > 0 and match.group(1) not in self.applied:
                    self.applied.append(match.group(1))
        else:
            session = self._session(runtime, disabled, hook)
        return [session.run(feeds) for feeds in self.samples]

    def _session(self, runtime: RuntimeConfig, disabled: Sequence[str], hook: Any) -> Session:
        return Session(self.model, with_disabled_optimizers(runtime, disabled), label="model", options_hook=hook)

    def max_diff(self, outputs: List[TensorMap]) -> Tuple[bool, float]:
        worst, differs = 0.0, False
        for ref, out in zip(self.reference, outputs):
            for name, a in ref.items():
                b = out[name]
                if is_numeric_tensor(a) and is_numeric_tensor(b):
                    pairs = [(a, b)]
                else:  # strings, sequences, maps: equal structure and text, then the numbers inside
                    same = reduce_values(a, b, distribution=False)
                    if same is None or same.items_unequal:
                        differs = True
                        continue
                    pairs = list(zip(numeric_leaves(a), numeric_leaves(b)))
                for x, y in pairs:
                    pair_differs, pair_worst = self._numeric_diff(x, y)
                    differs, worst = differs or pair_differs, max(worst, pair_worst)
        return differs, worst

    def _numeric_diff(self, a: np.ndarray, b: np.ndarray) -> Tuple[bool, float]:
        a64, b64 = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        if a64.shape != b64.shape:
            return True, 0.0
        diff = np.abs(a64 - b64)
        finite = np.isfinite(diff)
        differs = not finite.all() and not np.array_equal(np.isnan(a64), np.isnan(b64))
        worst = float(diff[finite].max()) if finite.any() else 0.0
        differs = differs or bool(np.any(diff[finite] > self.atol + self.rtol * np.abs(a64[finite])))
        return differs, worst

    def with_enabled(self, enabled: Sequence[str]) -> bool:
        """Whether B's outputs differ from A's with only `enabled` of the applied transformers on."""
        key = frozenset(enabled)
        path = self.workdir / f"opt_{len(self.graphs)}.onnx"
        disabled = [t for t in self.applied if t not in key]
        differs, worst = self.max_diff(self._outputs(self.b, disabled, log=False, save=path))
        self.graphs[key] = path
        self.trials.append({"enabled": sorted(key), "differs": differs, "max_abs_diff": worst})
        return differs


def bisect_optimizers(model: "bytes | str | Path", samples: Sequence[TensorMap], a: RuntimeConfig,
                      b: RuntimeConfig, *, atol: float = 1e-6, rtol: float = 1e-5) -> OptimizerSection:
    """The transformer(s) of session settings `b` that make its outputs differ from those of `a`.

    `a` and `b` differ in optimisation level and/or providers (e.g. opt level disable vs all).
    Outputs differ where |b - a| > atol + rtol * |a| anywhere, or NaN positions disagree.
    """
    data = model if isinstance(model, bytes) else Path(model).read_bytes()
    with tempfile.TemporaryDirectory(prefix="mi-optbisect-") as tmp:
        work = Path(tmp)
        bis = _Bisector(data, samples, a, b, atol, rtol, work)
        full_path = work / "opt_full.onnx"
        differs, worst = bis.max_diff(bis._outputs(b, (), log=True, save=full_path))
        if not differs:
            return OptimizerSection(bis.applied, [], False, False, worst, {}, bis.builds,
                                    "the outputs do not differ between the two settings", bis.trials)
        culprits = minimise(list(bis.applied), [], bis.with_enabled) if bis.applied else []
        together = len(culprits) > 1
        rewritten: Dict[str, List[str]] = {}
        key = frozenset(culprits)
        if culprits and key in bis.graphs:
            changed = _rewritten(onnx.load_from_string(data), onnx.load(str(bis.graphs[key])))
            rewritten = {" + ".join(culprits): changed}
        if not culprits:
            verdict = ("no applied transformer was found responsible: the difference comes from the "
                       "providers or kernels, not from a graph rewrite")
        elif together:
            verdict = f"no single pass: the difference needs {' and '.join(culprits)} together"
        else:
            verdict = f"{culprits[0]} changes the outputs"
        return OptimizerSection(bis.applied, culprits, together, True, worst, rewritten, bis.builds, verdict,
                                bis.trials)


def _rewritten(original: onnx.ModelProto, optimised: onnx.ModelProto) -> List[str]:
    """Names of original nodes that are gone or changed, and of new nodes, in the optimised graph."""
    def signature(node: onnx.NodeProto) -> Tuple[str, str, Tuple[str, ...], Tuple[str, ...]]:
        return node.name, node.op_type, tuple(node.input), tuple(node.output)

    before = {signature(n) for n in original.graph.node}
    after = {signature(n) for n in optimised.graph.node}
    names: Set[str] = {s[0] for s in before ^ after}
    order = [n.name for n in original.graph.node] + [n.name for n in optimised.graph.node]
    return [n for n in dict.fromkeys(order) if n in names]
