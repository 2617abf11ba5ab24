"""State wiring: which output of a step feeds which input of the next step, and the initial state.

Found from the model's signature (`state` -> `stateN`, `h0` -> `hn`, `past_key_values.0.key` ->
`present.0.key`, `x_in` -> `x_out`, ... with matching dtype and rank), or given as explicit
`IN=OUT` pairs. A state-like input left unwired is an error naming it: running with a fabricated
constant state would give a comparison of the wrong thing.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..core.types import Dim, TensorInfo, TensorMap, format_shape
from ..errors import InputDataError, UsageError
from ..results.sequence import WiringRow

if TYPE_CHECKING:
    from .cachedims import StateDims

# Input names that look like a recurrent state or a cache: these must be wired.
_STATE_LIKE = re.compile(r"(state|past|cache|hidden|memory|(^|[._])[hc](x|0|_0|_in)?$|(^|[._])[hc]_?0)", re.I)
_KV = re.compile(r"(past|cache)", re.I)


@dataclass(frozen=True)
class StateWiring:
    """Every state pair of a model, plus its step (non-state) inputs and outputs."""

    pairs: Tuple[WiringRow, ...]
    """Each fed-back tensor, as the result records it (`results.sequence.WiringRow`)."""
    step_inputs: Tuple[str, ...]
    step_outputs: Tuple[str, ...]
    notes: Tuple[str, ...] = field(default=())

    def describe(self) -> str:
        """A printable description, one line per pair."""
        if not self.pairs:
            return "no state: every step is independent"
        lines = [f"{p.output} -> {p.input}  ({p.dtype} {p.shape}{', KV cache' if p.kv_cache else ''}, {p.source})"
                 for p in self.pairs]
        lines.append(f"step inputs: {', '.join(self.step_inputs) or '-'}; step outputs: {', '.join(self.step_outputs) or '-'}")
        return "\n".join(lines + list(self.notes))

    @property
    def state_inputs(self) -> List[str]:
        return [p.input for p in self.pairs]

    def feed_back(self, outputs: Mapping[str, np.ndarray]) -> TensorMap:
        """The next step's state inputs from this step's outputs."""
        return {p.input: outputs[p.output] for p in self.pairs}


def candidate_outputs(name: str) -> List[str]:
    """Output names that would carry input `name` forward, most specific first."""
    out: List[str] = []
    for pattern, repl in ((r"past_key_values", "present"), (r"^past", "present"), (r"past", "present"),
                          (r"_in$", "_out"), (r"^in_", "out_"), (r"\.in$", ".out"), (r"_0$", "_n"), (r"0$", "n"),
                          (r"_prev$", ""), (r"^prev_", ""), (r"_in$", ""), (r"^input_", "output_")):
        candidate = re.sub(pattern, repl, name)
        if candidate != name:
            out.append(candidate)
    out += [f"{name}N", f"{name}n", f"{name}_out", f"{name}_new", f"{name}_next", f"new_{name}", f"next_{name}",
            f"{name}.out", f"out_{name}", f"{name}_n"]
    return list(dict.fromkeys(out))


def _compatible(a: TensorInfo, b: TensorInfo, kv: bool) -> bool:
    if a.elem_type and b.elem_type and a.elem_type != b.elem_type:
        return False
    if a.shape is None or b.shape is None:
        return True
    if len(a.shape) != len(b.shape):
        return False
    for da, db in zip(a.shape, b.shape):
        # A KV cache's sequence axis grows (past vs past+1); symbolic or unknown dims always fit.
        if isinstance(da, int) and isinstance(db, int) and da >= 0 and db >= 0 and da != db and not kv:
            return False
    return True


def parse_pairs(texts: Sequence[str]) -> List[Tuple[str, str]]:
    """'IN=OUT' strings (or a YAML map already split) -> [(IN, OUT)]."""
    pairs = []
    for text in texts:
        left, sep, right = str(text).partition("=")
        if not sep or not left.strip() or not right.strip():
            raise UsageError(f"--state '{text}': expected IN=OUT, e.g. --state state=stateN")
        pairs.append((left.strip(), right.strip()))
    return pairs


def detect_wiring(inputs: Sequence[TensorInfo], outputs: Sequence[TensorInfo],
                  explicit: Sequence[Tuple[str, str]] = (), *, model: str = "model") -> StateWiring:
    """Wire state outputs to state inputs: `explicit` pairs first, then by name patterns."""
    ins = {t.name: t for t in inputs}
    outs = {t.name: t for t in outputs}
    pairs: List[WiringRow] = []
    used_out: set = set()
    for name, out in explicit:
        if name not in ins:
            raise UsageError(f"--state {name}={out}: {model} has no input '{name}'",
                             hint=f"inputs: {', '.join(ins)}")
        if out not in outs:
            raise UsageError(f"--state {name}={out}: {model} has no output '{out}'",
                             hint=f"outputs: {', '.join(outs)}")
        kv = bool(_KV.search(name))
        if not _compatible(ins[name], outs[out], kv=True):
            raise UsageError(f"--state {name}={out}: {model}'s input is {ins[name].dtype_name} "
                             f"{format_shape(ins[name].shape)} but the output is {outs[out].dtype_name} "
                             f"{format_shape(outs[out].shape)}")
        pairs.append(WiringRow(name, out, ins[name].dtype_name, format_shape(ins[name].shape), kv, "explicit"))
        used_out.add(out)
    wired = {p.input for p in pairs}
    for name, info in ins.items():
        if name in wired:
            continue
        kv = bool(_KV.search(name))
        for candidate in candidate_outputs(name):
            if candidate in outs and candidate not in used_out and _compatible(info, outs[candidate], kv):
                pairs.append(WiringRow(name, candidate, info.dtype_name, format_shape(info.shape), kv, "auto"))
                used_out.add(candidate)
                wired.add(name)
                break
    unwired = [n for n in ins if n not in wired and _STATE_LIKE.search(n)]
    if unwired:
        raise UsageError(f"{model}: state input '{unwired[0]}' is not wired to any output",
                         hint=f"give it with --state {unwired[0]}=OUTPUT (outputs: "
                              f"{', '.join(o for o in outs if o not in used_out)})")
    order = {n: i for i, n in enumerate(ins)}
    pairs.sort(key=lambda p: order[p.input])
    return StateWiring(tuple(pairs), tuple(n for n in ins if n not in wired),
                       tuple(o for o in outs if o not in used_out))


def check_same_wiring(a: StateWiring, b: StateWiring) -> None:
    """Models A and B must carry the same state (B's dtypes may differ: an fp16 candidate)."""
    if [(p.input, p.output) for p in a.pairs] != [(p.input, p.output) for p in b.pairs]:
        raise UsageError("models A and B carry different state: "
                         f"A {[f'{p.input}={p.output}' for p in a.pairs]} vs B {[f'{p.input}={p.output}' for p in b.pairs]}",
                         hint="give the same --state pairs for both, or rename the inputs")


# ---- initial state -------------------------------------------------------------------------------
def initial_state(wiring: StateWiring, inputs: Sequence[TensorInfo], step_feeds: Mapping[str, np.ndarray],
                  init_file: Optional[Path] = None, dims: "Optional[StateDims]" = None,
                  model: str = "model") -> Tuple[TensorMap, List[str]]:
    """Zeros for every state input (or the arrays of `init_file`), sized from the first step's feeds.

    A symbolic dim takes the size that the same symbol has in a step input (batch), else what `dims`
    (sequence/cachedims: `--shape`, the consuming attention op or Concat, genai_config.json) found;
    a KV cache's sequence axis starts at 0 (an empty cache); a batch axis left free is the step's
    batch. Any other free dim of a KV cache is an error naming it and the flag that sets it (zeros
    there would be a cache the attention kernel refuses); of another state it becomes 1, with a note.
    """
    specs = {t.name: t for t in inputs}
    given: TensorMap = {}
    if init_file is not None:
        given = _read_init(init_file, wiring)
    symbols: Dict[str, int] = {}
    batch = None
    for name, value in step_feeds.items():
        spec = specs.get(name)
        if value.ndim and batch is None:
            batch = int(value.shape[0])
        for dim, size in zip(spec.shape or () if spec else (), value.shape):
            if isinstance(dim, str) and dim:
                symbols.setdefault(dim, int(size))
    state: TensorMap = {}
    notes: List[str] = []
    for pair in wiring.pairs:
        spec = specs[pair.input]
        dtype = spec.numpy_dtype or np.dtype(np.float32)
        if pair.input in given:
            state[pair.input] = np.asarray(given[pair.input]).astype(dtype, copy=False)
            continue
        if dims is not None and pair.input in dims.shapes:
            state[pair.input] = np.zeros(dims.shapes[pair.input], dtype=dtype)
            continue
        shape = [_size(axis, dim, symbols, pair, spec, dims, batch, notes, model)
                 for axis, dim in enumerate(spec.shape or ())]
        state[pair.input] = np.zeros(shape, dtype=dtype)
    if dims is not None:
        notes += dims.notes
    return state, notes


_SEQUENCE_DIM = re.compile(r"past|seq|len|total", re.I)


def growing_axis(pair: WiringRow, spec: TensorInfo, dims: "Optional[StateDims]",
                 symbols: Mapping[str, int]) -> Optional[int]:
    """The axis a KV cache grows along: what the model says (sequence/cachedims), else its only free
    dim (fixed by no step input and nothing in the model), else its only free dim named like a
    sequence length (past, seq, len, total); None: unknown."""
    if dims is not None and pair.input in dims.growing:
        return dims.growing[pair.input]
    free = [axis for axis, dim in enumerate(spec.shape or ())
            if not (isinstance(dim, int) and dim >= 0) and not (isinstance(dim, str) and dim in symbols)
            and not (dims is not None and dims.size(pair.input, axis))]
    if len(free) == 1:
        return free[0]
    named = [axis for axis in free if isinstance(spec.shape[axis], str)  # type: ignore[index]
             and _SEQUENCE_DIM.search(str(spec.shape[axis]))]  # type: ignore[index]
    return named[0] if len(named) == 1 else None


def _size(axis: int, dim: Dim, symbols: Dict[str, int], pair: WiringRow, spec: TensorInfo,
          dims: "Optional[StateDims]", batch: Optional[int], notes: List[str], model: str) -> int:
    if isinstance(dim, int) and dim >= 0:
        return dim
    if isinstance(dim, str) and dim in symbols:
        return symbols[dim]
    found = dims.size(pair.input, axis) if dims is not None else None
    if found is not None:
        return found[0]
    if not pair.kv_cache:
        notes.append(f"state '{pair.input}': dim '{dim}' is not fixed by the step inputs; 1 assumed")
        return 1
    grows = growing_axis(pair, spec, dims, symbols)
    if axis == grows or (grows is None and dims is None):
        return 0  # an empty cache (without the model's view, as before: every free dim of a cache)
    if axis == 0 and batch is not None:
        return batch
    label = f"'{dim}'" if isinstance(dim, str) and dim else "unnamed"
    symbol = f"--shape {dim}:N, " if isinstance(dim, str) and dim else ""
    example = "x".join("0" if i == grows else str(d) if isinstance(d, int) and d >= 0
                       else str(batch or 1) if i == 0 else "N" for i, d in enumerate(spec.shape or ()))
    raise InputDataError(f"{model}: state input '{pair.input}' {format_shape(spec.shape)}: dim {axis} ({label}) "
                         f"of the empty cache is not fixed by the step inputs nor found in the model "
                         f"(its attention op, a Concat, genai_config.json)",
                         hint=f"set it with {symbol}--shape {pair.input}:{example} or --init-state FILE.npz")


def _read_init(path: Path, wiring: StateWiring) -> TensorMap:
    try:
        with np.load(path, allow_pickle=False) as archive:
            values = {k: archive[k] for k in archive.files}
    except (ValueError, OSError, EOFError) as exc:
        raise InputDataError(f"{path}: not a readable .npz of initial states ({exc})") from exc
    known = set(wiring.state_inputs)
    unknown = [k for k in values if k not in known]
    if unknown:
        raise InputDataError(f"{path}: '{unknown[0]}' is not a state input",
                             hint=f"state inputs: {', '.join(sorted(known))}")
    return values
