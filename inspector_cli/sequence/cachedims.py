"""The empty state's symbolic dims, resolved from the model (issue 41).

A KV cache declared `[batch_size, 2, past_sequence_length, kv_cache_dim]` (onnxruntime-genai's model
builder) starts empty along its sequence axis, but its head dimension must be the one the attention
kernel checks: GroupQueryAttention refuses `past_key` whose last dim is not the packed QKV width's
head size. Each free dim of a state input is resolved, in this order:

1. `--shape NAME:DIMS` for a state input (its whole initial shape) or `--shape SYMBOL:N` for a
   symbolic dim of the state (every state input that has it);
2. the nodes that consume the state: GroupQueryAttention / MultiHeadAttention / Attention (contrib)
   and ai.onnx Attention (head count from the attributes, head size from the query's or key's width,
   read off the weights that produce it: MatMul, MatMulNBits, Gemm), Concat (the other inputs' dims),
   followed through Cast / Identity / Transpose;
3. `genai_config.json` beside the model (onnxruntime-genai's: `head_size`, `num_key_value_heads`
   for the inputs named by `past_key_names` / `past_value_names`);

and the sequence axis (the one a KV cache grows along) is the attention op's past axis, a Concat's
axis, or the axis whose symbol the paired output renames. What stays free is an error naming the dim
and the flag that sets it (sequence/wiring.initial_state).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from ..core.graph import ModelGraph
from ..core.types import TensorInfo, format_shape
from ..errors import UsageError
from .wiring import StateWiring

Shapes = Sequence[Tuple[str, Tuple[int, ...]]]
_MS = "com.microsoft"
# ops whose output 0 has the shape of input 0 (the width of a projection reaches the attention through them)
_SAME_SHAPE = frozenset({"Add", "Sub", "Mul", "Div", "Cast", "Identity", "Relu", "Sigmoid", "Tanh", "Erf",
                         "RotaryEmbedding", "SkipLayerNormalization", "SkipSimplifiedLayerNormalization",
                         "SimplifiedLayerNormalization", "LayerNormalization", "FastGelu", "BiasGelu",
                         "QuickGelu", "Gelu", "DequantizeLinear", "QuantizeLinear"})
_GENAI_CONFIG = "genai_config.json"
_GENAI_CONFIG_MAX = 1 << 20  # a config past 1 MiB is not onnxruntime-genai's


@dataclass
class StateDims:
    """Per state input: the sizes found for its axes (with where each came from) and its sequence axis."""

    sizes: Dict[str, Dict[int, Tuple[int, str]]] = field(default_factory=dict)
    """input -> axis -> (size, source), e.g. 3 -> (16, "GroupQueryAttention '...': packed QKV 128 / 8 heads")."""
    growing: Dict[str, int] = field(default_factory=dict)
    """input -> the axis a KV cache grows along (starts at 0 when empty)."""
    shapes: Dict[str, Tuple[int, ...]] = field(default_factory=dict)
    """input -> its whole initial shape from `--shape NAME:DIMS`."""
    notes: List[str] = field(default_factory=list)

    def describe(self, specs: Sequence[TensorInfo]) -> List[str]:
        """One line per symbolic dim of the state this resolved: `kv_cache_dim = 16 (source)`."""
        lines: Dict[str, str] = {}
        for spec in specs:
            for axis, (size, source) in sorted(self.sizes.get(spec.name, {}).items()):
                dim = spec.shape[axis] if spec.shape is not None and axis < len(spec.shape) else None
                if isinstance(dim, str) and dim and dim not in lines:
                    lines[dim] = f"state dim {dim} = {size} ({source})"
        return list(lines.values())

    def size(self, name: str, axis: int) -> Optional[Tuple[int, str]]:
        return self.sizes.get(name, {}).get(axis)

    def _set(self, name: str, axis: int, size: int, source: str) -> None:
        if size > 0:
            self.sizes.setdefault(name, {}).setdefault(axis, (size, source))


def resolve_state_dims(graph: ModelGraph, wiring: StateWiring, shapes: Shapes = ()) -> StateDims:
    """What the model (and `--shape`) says about each state input's free dims; see the module doc."""
    dims = StateDims()
    specs = {t.name: t for t in graph.inputs}
    states = [p.input for p in wiring.pairs]
    _apply_shapes(dims, specs, states, wiring, shapes)
    outputs = {t.name: t for t in graph.outputs}
    for pair in wiring.pairs:
        spec = specs[pair.input]
        if spec.shape is None or pair.input in dims.shapes:
            continue
        _from_consumers(graph, dims, pair.input, pair.input, tuple(range(len(spec.shape))), depth=0)
        if pair.kv_cache and pair.input not in dims.growing:
            out = outputs.get(pair.output)
            renamed = [axis for axis, (a, b) in enumerate(zip(spec.shape, out.shape if out and out.shape else ()))
                       if isinstance(a, str) and a and isinstance(b, str) and b and a != b]
            if len(renamed) == 1:
                dims.growing[pair.input] = renamed[0]
    _from_genai_config(graph, dims, specs, wiring)
    return dims


# ---- --shape -------------------------------------------------------------------------------------
def _apply_shapes(dims: StateDims, specs: Dict[str, TensorInfo], states: List[str], wiring: StateWiring,
                  shapes: Shapes) -> None:
    symbols = {d for name in states for d in (specs[name].shape or ()) if isinstance(d, str) and d}
    for name, given in shapes:
        if name in states:
            declared = specs[name].shape
            if declared is not None and len(declared) != len(given):
                raise UsageError(f"--shape {name}: {len(given)} dimensions given, the state input has "
                                 f"{len(declared)} {format_shape(declared)}")
            for axis, (size, want) in enumerate(zip(given, declared or ())):
                if isinstance(want, int) and want >= 0 and size != want:
                    raise UsageError(f"--shape {name}:{'x'.join(map(str, given))}: dimension {axis} is {size}, "
                                     f"but the model fixes it at {want} {format_shape(declared)}")
            dims.shapes[name] = tuple(given)
        elif name in symbols:
            if len(given) != 1:
                raise UsageError(f"--shape {name}:{'x'.join(map(str, given))}: '{name}' is a symbolic dim of the "
                                 f"state; give one size, e.g. --shape {name}:16")
            for state in states:
                for axis, dim in enumerate(specs[state].shape or ()):
                    if dim == name:
                        dims._set(state, axis, given[0], f"--shape {name}:{given[0]}")
        else:
            step = set(wiring.step_inputs)
            what = "a step input (its values come from the prompt or the steps)" if name in step else "not a state input"
            raise UsageError(f"--shape {name}: {what}; in sequence and decode mode --shape sets a state input's "
                             f"initial shape or one symbolic dim of the state",
                             hint=f"state inputs: {', '.join(states) or '-'}; their symbolic dims: "
                                  f"{', '.join(sorted(symbols)) or '-'}")


# ---- consumers -------------------------------------------------------------------------------------
def _from_consumers(graph: ModelGraph, dims: StateDims, state: str, tensor: str, axes: Tuple[int, ...],
                    depth: int) -> None:
    """Sizes of `state`'s axes from the nodes reading `tensor` (`axes[i]`: the state's axis that is
    `tensor`'s axis i, through the Transposes between them)."""
    for node in graph.consumers.get(tensor, ()):
        label = f"{node.op_type} '{node.name}'"
        for position, name in enumerate(node.inputs):
            if name != tensor:
                continue
            if node.domain == _MS and node.op_type == "GroupQueryAttention" and position in (3, 4) and len(axes) == 4:
                _attention(graph, dims, state, axes, node, label, heads=_attr(graph, node.name, "kv_num_heads"),
                           head=_gqa_head(graph, node.name, node.inputs), seq=2)
            elif node.domain == _MS and node.op_type == "MultiHeadAttention" and position in (6, 7) and len(axes) == 4:
                _attention(graph, dims, state, axes, node, label, heads=_attr(graph, node.name, "num_heads"),
                           head=_mha_head(graph, node.name, node.inputs, value=position == 7), seq=2)
            elif node.domain == _MS and node.op_type == "Attention" and position == 4 and len(axes) == 5:
                heads = _attr(graph, node.name, "num_heads")
                width = _dim(graph, node.inputs[1], 1) if len(node.inputs) > 1 else None
                head = width // (3 * heads) if width and heads and width % (3 * heads) == 0 else None
                _attention(graph, dims, state, axes[1:], node, label, heads=heads, head=head, seq=2)
            elif node.domain in ("", "ai.onnx") and node.op_type == "Attention" and position in (4, 5) and len(axes) == 4:
                heads = _attr(graph, node.name, "kv_num_heads")
                head = _onnx_attention_head(graph, node.inputs, heads, value=position == 5)
                _attention(graph, dims, state, axes, node, label, heads=heads, head=head, seq=2)
            elif node.domain in ("", "ai.onnx") and node.op_type == "Concat":
                _concat(graph, dims, state, axes, node, label, position)
            elif node.domain in ("", "ai.onnx") and node.op_type in ("Cast", "Identity") and depth < 4:
                _from_consumers(graph, dims, state, node.outputs[0], axes, depth + 1)
            elif node.domain in ("", "ai.onnx") and node.op_type == "Transpose" and depth < 4:
                perm = _attr(graph, node.name, "perm", None)
                if isinstance(perm, list) and sorted(perm) == list(range(len(axes))):
                    _from_consumers(graph, dims, state, node.outputs[0], tuple(axes[p] for p in perm), depth + 1)


def _attention(graph: ModelGraph, dims: StateDims, state: str, axes: Tuple[int, ...], node, label: str,
               heads: Optional[int], head: Optional[Tuple[int, str]], seq: int) -> None:
    """A past input laid out [batch, heads, past, head size] (axes[i]: the state's axis)."""
    dims.growing.setdefault(state, axes[seq])
    if heads:
        dims._set(state, axes[1], int(heads), f"{label}: {heads} heads")
    if head is not None:
        dims._set(state, axes[3], head[0], f"{label}: head size {head[1]}")


def _concat(graph: ModelGraph, dims: StateDims, state: str, axes: Tuple[int, ...], node, label: str,
            position: int) -> None:
    rank = len(axes)
    axis = _attr(graph, node.name, "axis", 0)
    axis = int(axis) + rank if int(axis) < 0 else int(axis)  # type: ignore[arg-type]
    if not 0 <= axis < rank:
        return
    dims.growing.setdefault(state, axes[axis])
    for index, other in enumerate(node.inputs):
        if index == position or not other:
            continue
        shape = graph.tensor_info(other).shape
        if shape is None or len(shape) != rank:
            continue
        for i, dim in enumerate(shape):
            if i != axis and isinstance(dim, int) and dim > 0:
                dims._set(state, axes[i], dim, f"{label}: its input '{other}' {format_shape(shape)}")


# ---- head sizes -----------------------------------------------------------------------------------
def _attr(graph: ModelGraph, node: str, name: str, default: object = None) -> object:
    value = graph.node_attribute(node, name, default)
    return value if not isinstance(value, bytes) else default


def _gqa_head(graph: ModelGraph, node: str, inputs: Sequence[str]) -> Optional[Tuple[int, str]]:
    """GroupQueryAttention: query [B, S, num_heads * H], or packed QKV [B, S, (num_heads + 2 kv) * H]."""
    heads, kv = _attr(graph, node, "num_heads"), _attr(graph, node, "kv_num_heads")
    width = _last_dim(graph, inputs[0])
    if not (isinstance(heads, int) and isinstance(kv, int) and width):
        return None
    packed = len(inputs) < 2 or not inputs[1]
    parts = heads + 2 * kv if packed else heads
    if width % parts:
        return None
    what = f"packed QKV width {width} / ({heads} + 2 x {kv}) heads" if packed else f"query width {width} / {heads} heads"
    return width // parts, what


def _mha_head(graph: ModelGraph, node: str, inputs: Sequence[str], value: bool) -> Optional[Tuple[int, str]]:
    """MultiHeadAttention: key/value in BNSH (4-D: the last dim), else the query's (or value's) width / heads."""
    heads = _attr(graph, node, "num_heads")
    source = inputs[2] if value and len(inputs) > 2 and inputs[2] else (inputs[1] if len(inputs) > 1 and inputs[1] else "")
    if source:
        shape = graph.tensor_info(source).shape
        if shape is not None and len(shape) == 4 and isinstance(shape[3], int) and shape[3] > 0:
            return shape[3], f"{'value' if value else 'key'} '{source}' {format_shape(shape)}"
    width = _last_dim(graph, source or inputs[0])
    if isinstance(heads, int) and heads and width and width % heads == 0:
        return width // heads, f"width {width} / {heads} heads"
    return None


def _onnx_attention_head(graph: ModelGraph, inputs: Sequence[str], kv_heads: object,
                         value: bool) -> Optional[Tuple[int, str]]:
    """ai.onnx Attention: K / V as [B, kv heads, S, H] (the last dim) or [B, S, kv heads * H]."""
    source = inputs[2] if value else inputs[1]
    shape = graph.tensor_info(source).shape
    if shape is not None and len(shape) == 4 and isinstance(shape[3], int) and shape[3] > 0:
        return shape[3], f"'{source}' {format_shape(shape)}"
    width = _last_dim(graph, source)
    if isinstance(kv_heads, int) and kv_heads and width and width % kv_heads == 0:
        return width // kv_heads, f"width {width} / {kv_heads} heads"
    return None


def _dim(graph: ModelGraph, tensor: str, axis: int) -> Optional[int]:
    shape = graph.tensor_info(tensor).shape
    if shape is None or not -len(shape) <= axis < len(shape):
        return None
    dim = shape[axis]
    return dim if isinstance(dim, int) and dim > 0 else None


def _last_dim(graph: ModelGraph, tensor: str, depth: int = 0) -> Optional[int]:
    """The last dim of `tensor`: from shape inference, else read off the op that produces it (ONNX
    shape inference stops at contrib ops: MatMulNBits' N, a MatMul's weight, through element-wise ops)."""
    known = _dim(graph, tensor, -1)
    if known is not None or depth > 6:
        return known
    node = graph.producer.get(tensor)
    if node is None:
        return None
    if node.op_type == "MatMulNBits":
        n = _attr(graph, node.name, "N")
        return int(n) if isinstance(n, int) and n > 0 else None
    if node.op_type in ("MatMul", "MatMulInteger", "FusedMatMul") and len(node.inputs) > 1:
        return _dim(graph, node.inputs[1], -1)
    if node.op_type == "Gemm" and len(node.inputs) > 1:
        return _dim(graph, node.inputs[1], 0 if _attr(graph, node.name, "transB", 0) else 1)
    if node.op_type in _SAME_SHAPE:
        sizes = [_last_dim(graph, x, depth + 1) for x in node.inputs[:2] if x]
        return max((s for s in sizes if s), default=None)
    return None


# ---- genai_config.json ------------------------------------------------------------------------------
def _from_genai_config(graph: ModelGraph, dims: StateDims, specs: Dict[str, TensorInfo], wiring: StateWiring) -> None:
    """onnxruntime-genai's config beside the model: its KV caches are [batch, kv heads, past, head size]."""
    config = read_genai_config(graph.path)
    if config is None:
        return
    decoder = config.get("model", {}).get("decoder", {})
    names = decoder.get("inputs", {})
    patterns = [_pattern(names.get(k)) for k in ("past_key_names", "past_value_names")]
    head, heads = decoder.get("head_size"), decoder.get("num_key_value_heads")
    source = f"{_GENAI_CONFIG} beside the model"
    for pair in wiring.pairs:
        shape = specs[pair.input].shape
        if shape is None or len(shape) != 4 or not any(p and p.fullmatch(pair.input) for p in patterns):
            continue
        dims.growing.setdefault(pair.input, 2)
        if isinstance(heads, int):
            _agree(dims, pair.input, 1, heads, f"{source}: num_key_value_heads {heads}")
        if isinstance(head, int):
            _agree(dims, pair.input, 3, head, f"{source}: head_size {head}")


def _agree(dims: StateDims, name: str, axis: int, size: int, source: str) -> None:
    found = dims.size(name, axis)
    if found is None:
        dims._set(name, axis, size, source)
    elif found[0] != size:
        dims.notes.append(f"state '{name}': dim {axis} is {found[0]} ({found[1]}); {source} says {size}, not used")


def _pattern(text: object) -> Optional["re.Pattern[str]"]:
    if not isinstance(text, str) or "%d" not in text:
        return None
    return re.compile(re.escape(text).replace("%d", r"\d+"))


def read_genai_config(model_path: Optional[Path]) -> Optional[dict]:
    """onnxruntime-genai's `genai_config.json` beside the model, when it describes this file (its
    decoder's `filename` is the model's name); None otherwise or when it is not readable JSON."""
    if model_path is None:
        return None
    path = Path(model_path).parent / _GENAI_CONFIG
    try:
        if not path.is_file() or path.stat().st_size > _GENAI_CONFIG_MAX:
            return None
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    decoder = config.get("model", {}).get("decoder", {}) if isinstance(config, dict) else {}
    if not isinstance(decoder, dict) or decoder.get("filename", Path(model_path).name) != Path(model_path).name:
        return None
    return config

