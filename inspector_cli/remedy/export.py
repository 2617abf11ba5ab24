"""A remedy plan in the words of each quantiser that will build it again.

- onnxruntime (`quantize_static`): `nodes_to_exclude` (fp32 node names), `TensorQuantOverrides` (16-bit
  activations as `quant_type` QUInt16/QInt16, per-channel weights as `axis` + symmetric QInt8, another
  calibration as `rmin`/`rmax`), and a ready `extra_options` dict (with `UseQDQContribOps` when the model's
  opset is below 21: the 16-bit Q/DQ ops are then com.microsoft's, as in the written model). JSON holds the
  QuantType members by name: `quant_type_overrides(doc)` turns them into `QuantType` for quantize_static.
- NNCF (`nncf.IgnoredScope`): `names` (every float node) and `types` (op types all of whose quantised nodes
  are in float); NNCF's ONNX backend quantises to int8 only, so 16-bit, per-channel and calibration
  remedies are listed under `not_expressible` (their nodes stay quantised by NNCF's own rules).
- ModelOpt (`python -m modelopt.onnx.quantization --nodes_to_exclude`): one anchored regular expression per
  float node (ModelOpt matches node names with `re.match`); same limit as NNCF.
`rules` says whose rules the plan's model was built by (exclusion.quantiser_rules: NNCF's for a model NNCF
wrote, else onnxruntime's): the rebuild it predicts is that quantiser's.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Optional

import onnx

from .exclusion import VALUE_PRESERVING, Quantisers
from .qdq_patch import GraphIndex, quantised_nodes, weight_input
from .remedies import Applied
from .requant import QUANT_TYPE_NAMES, weight_axis


def _fp32_tensor_names(fp32: Optional[onnx.ModelProto]) -> set:
    if fp32 is None:
        return set()
    names = {i.name for i in fp32.graph.input} | {t.name for t in fp32.graph.initializer}
    return names | {o for n in fp32.graph.node for o in n.output}


OUTPUT_RENAME = "_QuantizeLinear_Input"
"""quantize_static renames a quantised graph output X's producer output to X + this (its Q reads it, its DQ
writes X): the tensor an override names is then X."""


def _fp32_tensor(tensor: str, known: set) -> Optional[str]:
    """The fp32 model's name of a QDQ model's float tensor, or None when the fp32 model has no such tensor
    (an override naming it would make quantize_static refuse every override: 'not present in the model')."""
    if not known or tensor in known:
        return tensor
    if tensor.endswith(OUTPUT_RENAME) and tensor[: -len(OUTPUT_RENAME)] in known:
        return tensor[: -len(OUTPUT_RENAME)]
    return None


def onnxruntime_options(applied: Applied, qdq: onnx.ModelProto, fp32: Optional[onnx.ModelProto],
                        fp32_names: Mapping[str, str], index: Optional[GraphIndex] = None) -> Dict[str, Any]:
    """{"nodes_to_exclude": [...], "TensorQuantOverrides": {...}, "extra_options": {...}, "unmapped": [...]}
    (`index`: qdq's, when the caller has it)."""
    index = index or GraphIndex(qdq.graph)
    known = _fp32_tensor_names(fp32)
    fp32_index = GraphIndex(fp32.graph) if fp32 is not None else None
    overrides: Dict[str, List[Dict[str, Any]]] = {}
    unmapped: List[str] = []
    for pairs, entry in ((applied.pairs_16bit, lambda p: {"quant_type": QUANT_TYPE_NAMES[p.dtype]}),
                         (applied.pairs_recalibrated, lambda p: {"rmin": round(p.range()[0], 9),
                                                                 "rmax": round(p.range()[1], 9)})):
        for pair, params in pairs.items():
            tensor = index.producer[pair].input[0]
            name = _fp32_tensor(tensor, known)
            if name is None:
                unmapped.append(tensor)
                continue
            overrides[name] = [entry(params)]
    for node_name in applied.per_channel:
        node = index.by_name[node_name]
        position = weight_input(index, node)[0]  # type: ignore[index]
        source = fp32_index.by_name.get(fp32_names.get(node_name, node_name)) if fp32_index is not None else None
        weight = source.input[position] if source is not None and position < len(source.input) else None
        if weight is None:
            unmapped.append(node_name)
            continue
        overrides[weight] = [{"axis": weight_axis(node), "quant_type": "QInt8", "symmetric": True}]
    opset = next((o.version for o in qdq.opset_import if o.domain in ("", "ai.onnx")), 0)
    extra: Dict[str, Any] = {}
    if overrides:
        extra["TensorQuantOverrides"] = overrides
    if applied.pairs_16bit and opset < 21:
        extra["UseQDQContribOps"] = True
    return {"nodes_to_exclude": [fp32_names.get(n, n) for n in applied.float_nodes],
            "TensorQuantOverrides": overrides, "extra_options": extra, "unmapped": unmapped}


def not_expressible(applied: Applied) -> Dict[str, List[str]]:
    """Remedies only onnxruntime's overrides can say: remedy -> tensors or nodes."""
    out: Dict[str, List[str]] = {}
    if applied.pairs_16bit:
        out["a16"] = sorted(applied.pairs_16bit)
    if applied.per_channel:
        out["per-channel"] = sorted(applied.per_channel)
    if applied.pairs_recalibrated:
        out["calibration"] = sorted(applied.pairs_recalibrated)
    return out


def nncf_readers(applied: Applied, qdq: onnx.ModelProto, quantisers: Optional[Quantisers] = None) -> List[str]:
    """The nodes NNCF must ignore besides the plan's float nodes for its rebuild to leave float what the plan
    leaves float. onnxruntime's rules (which the plan follows, exclusion.py) drop a passive op's output
    quantiser with its input's: the plan's last AveragePool before a classifier's Reshape -> Gemm reads float
    once the op before it is excluded. NNCF quantises every input of the ops it quantises, wherever the value
    comes from (its quantiser on the Gemm's input moves up through the Reshape to the pool's output), so an
    ignored scope of the float nodes alone keeps that quantiser: on EfficientNet's NNCF int8 (whose pool
    output saturates) the rebuilt model's logits stayed all zero where the plan's read cosine 0.99. Those
    readers are: the nodes still quantised that read, directly or through passive ops (Reshape, Transpose,
    pools...), a tensor whose pair the plan removed; returned in graph order (`quantisers`: qdq's, when the
    caller has them: the plan's builder does). A reader behind movable ops only (Reshape, Transpose, Pad: no
    MaxPool) is not one: the plan gives it a pair of its own with the removed pair's parameters, as both
    rebuilds do (exclusion.MOVABLE), and the search puts it in float when that pair hurts."""
    quantisers = quantisers or Quantisers(qdq)
    ops = quantisers.ops
    if ops is None:
        return []
    index = quantisers.index
    floats = set(applied.float_nodes)
    found: Dict[str, None] = {}
    seen: set = set()

    def walk(tensor: str, requantised: set) -> None:
        for reader in index.consumers.get(tensor, []):
            if reader.op_type == "DequantizeLinear" or reader.name in floats or reader.name in seen:
                continue
            seen.add(reader.name)
            if reader.op_type == "QuantizeLinear":
                continue  # quantised again here: the plan keeps this quantiser too
            if reader.op_type in ops.passive or reader.op_type in VALUE_PRESERVING:
                for out in reader.output:
                    walk(out, requantised)
            elif reader.op_type in ops.asking and reader.name and reader.name not in requantised:
                found[reader.name] = None

    for pair in quantisers.removed(floats):
        # a reader through movable ops only gets a pair of its own in the plan (exclusion._requantise_input),
        # as in NNCF's rebuild: nothing to ignore
        requantised = {name for name, _k, _t in quantisers.moved_readers.get(pair, [])}
        for dq in index.consumers.get(pair, []):
            if dq.op_type == "DequantizeLinear":
                walk(dq.output[0], requantised)
    return sorted(found, key=lambda n: quantisers.position.get(n, -1))


def nncf_scope(applied: Applied, qdq: onnx.ModelProto, fp32_names: Mapping[str, str],
               quantisers: Optional[Quantisers] = None) -> Dict[str, Any]:
    """`nncf.IgnoredScope(names=..., types=...)` arguments: the float nodes and the readers NNCF would quantise
    where the plan reads float (`nncf_readers`, also listed apart as `readers`); types whose every quantised
    node is ignored (an alternative, shorter spelling)."""
    readers = nncf_readers(applied, qdq, quantisers)
    ignored = set(applied.float_nodes) | set(readers)
    op_of = {n.name: n.op_type for n in qdq.graph.node}
    by_type: Dict[str, List[str]] = {}
    for node in quantised_nodes(qdq):
        by_type.setdefault(op_of[node], []).append(node)
    types = sorted(t for t, nodes in by_type.items() if nodes and all(n in ignored for n in nodes))
    return {"names": [fp32_names.get(n, n) for n in [*applied.float_nodes, *readers]], "types": types,
            "readers": [fp32_names.get(n, n) for n in readers], "not_expressible": not_expressible(applied)}


def modelopt_patterns(applied: Applied, fp32_names: Mapping[str, str]) -> Dict[str, Any]:
    """`--nodes_to_exclude` patterns of ModelOpt's ONNX quantiser (re.match on node names: anchored)."""
    return {"nodes_to_exclude": [f"^{re.escape(fp32_names.get(n, n))}$" for n in applied.float_nodes],
            "not_expressible": not_expressible(applied)}


def exports(applied: Applied, qdq: onnx.ModelProto, fp32: Optional[onnx.ModelProto],
            fp32_names: Mapping[str, str], quantisers: Optional[Quantisers] = None) -> Dict[str, Any]:
    """The document of `--export`: one section per consumer (`quantisers`: qdq's, built once by the plan's
    builder; else built here)."""
    quantisers = quantisers or Quantisers(qdq)
    return {"rules": quantisers.rules,
            "onnxruntime": onnxruntime_options(applied, qdq, fp32, fp32_names, quantisers.index),
            "nncf": nncf_scope(applied, qdq, fp32_names, quantisers),
            "modelopt": modelopt_patterns(applied, fp32_names)}


def quant_type_overrides(document: Mapping[str, Any]) -> Dict[str, Any]:
    """The `extra_options` of an exported document ready for quantize_static: QuantType names -> members, the
    ranges (`rmin`, `rmax`) as float32 arrays, which quantize_static reads `.dtype` of (imports
    onnxruntime.quantization). `document`: the export's "onnxruntime" section or its extra_options."""
    import numpy as np
    from onnxruntime.quantization import QuantType

    def entry_for(entry: Mapping[str, Any]) -> Dict[str, Any]:
        out = {key: np.array(value, dtype=np.float32) if key in ("rmin", "rmax") else value
               for key, value in entry.items()}
        if "quant_type" in out:
            out["quant_type"] = QuantType[out["quant_type"]]
        return out

    extra = dict(document.get("extra_options", document))
    overrides = {tensor: [entry_for(entry) for entry in entries]
                 for tensor, entries in extra.get("TensorQuantOverrides", {}).items()}
    if overrides:
        extra["TensorQuantOverrides"] = overrides
    return extra
