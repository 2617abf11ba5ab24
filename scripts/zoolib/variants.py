"""Variants of a zoo fp32 model, made with the tools users use: onnxruntime.quantization (QDQ per-tensor
and per-channel, QOperator, dynamic, MatMulNBits int4), onnxconverter_common fp16, and renamed nodes."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

Sample = Dict[str, np.ndarray]
VARIANTS = ("qdq_u8u8", "qdq_s8s8_pc", "qop", "dynamic", "fp16", "fp16_io", "int4", "renamed")


class _Reader:
    """onnxruntime CalibrationDataReader over in-memory samples."""

    def __init__(self, samples: Sequence[Sample], names: Sequence[str]) -> None:
        self._it = iter([{n: s[n] for n in names} for s in samples])

    def get_next(self):
        return next(self._it, None)

    def rewind(self) -> None:  # newer onnxruntime calls it between calibration passes
        pass


def _input_names(path: Path) -> List[str]:
    import onnx
    model = onnx.load(str(path), load_external_data=False)
    inits = {i.name for i in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in inits]


def preprocess(fp32: Path, out: Path) -> str:
    """quant_pre_process (symbolic shape inference + optimisation), as onnxruntime recommends; on models it
    cannot handle, retried without symbolic shapes, else the fp32 file is copied. Returns a note."""
    from onnxruntime.quantization.shape_inference import quant_pre_process
    try:
        quant_pre_process(str(fp32), str(out))
        return "quant_pre_process"
    except Exception as exc:  # noqa: BLE001 - record why and go on, as a user would
        try:
            quant_pre_process(str(fp32), str(out), skip_symbolic_shape=True)
            return f"quant_pre_process without symbolic shapes ({type(exc).__name__})"
        except Exception as exc2:  # noqa: BLE001
            shutil.copy(fp32, out)
            return f"no pre-processing ({type(exc2).__name__}: {str(exc2)[:120]})"


def _static(pre: Path, out: Path, calib: Sequence[Sample], *, fmt: str, act: str, weight: str, per_channel: bool,
            ops: Optional[List[str]] = None, exclude: Sequence[str] = (), extra_options: Optional[dict] = None):
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static
    quantize_static(str(pre), str(out), _Reader(calib, _input_names(pre)), quant_format=getattr(QuantFormat, fmt),
                    activation_type=getattr(QuantType, act), weight_type=getattr(QuantType, weight),
                    per_channel=per_channel, calibrate_method=CalibrationMethod.MinMax, op_types_to_quantize=ops,
                    nodes_to_exclude=list(exclude) or None, extra_options=_quant_types(extra_options or {}))


def _quant_types(extra: dict) -> dict:
    """extra_options as `mi fix --export` writes them (JSON: QuantType by name, ranges as numbers) -> what
    quantize_static takes (QuantType members, rmin/rmax as float32 arrays: it reads their dtype)."""
    import numpy as np
    from onnxruntime.quantization import QuantType

    def entry(e: dict) -> dict:
        out = {k: np.array(v, dtype=np.float32) if k in ("rmin", "rmax") else v for k, v in e.items()}
        return {**out, **({"quant_type": QuantType[out["quant_type"]]} if "quant_type" in out else {})}
    overrides = {t: [entry(e) for e in entries] for t, entries in (extra.get("TensorQuantOverrides") or {}).items()}
    return {**extra, **({"TensorQuantOverrides": overrides} if overrides else {})}


def _qoperator(pre: Path, out: Path, calib: Sequence[Sample]) -> Optional[str]:
    """QOperator U8S8; where onnxruntime's quantizer writes an invalid graph (it does on every transformer
    here: LayerNormalization/int32 bias inputs), retried with the ops users then restrict it to."""
    import onnxruntime as ort
    _static(pre, out, calib, fmt="QOperator", act="QUInt8", weight="QInt8", per_channel=False)
    try:
        ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
        return None
    except Exception as exc:  # noqa: BLE001
        ops = ["Conv", "MatMul", "Gemm"]
        _static(pre, out, calib, fmt="QOperator", act="QUInt8", weight="QInt8", per_channel=False, ops=ops)
        return f"op_types_to_quantize={ops} (all ops: {str(exc).splitlines()[0][-120:]})"


def _dynamic(pre: Path, out: Path, calib) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic
    # uint8 weights: onnxruntime's CPU ConvInteger has no int8-weight kernel
    quantize_dynamic(str(pre), str(out), weight_type=QuantType.QUInt8)


def _fp16(keep_io: bool, block: Sequence[str] = ()) -> Callable:
    def make(fp32: Path, out: Path, calib) -> str:
        import onnx
        import onnxruntime as ort
        from onnxconverter_common import float16
        model = float16.convert_float_to_float16(onnx.load(str(fp32)), keep_io_types=keep_io,
                                                 node_block_list=list(block) or None)
        try:
            ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
            onnx.save(model, str(out))
            return "onnxconverter_common"
        except Exception:  # noqa: BLE001
            # onnxconverter_common leaves Cast(to=float) and graph outputs read inside the graph with
            # the wrong type; onnxruntime's fork of the converter handles both (what users switch to).
            from onnxruntime.transformers import float16 as ort_float16
            model = ort_float16.convert_float_to_float16(onnx.load(str(fp32)), keep_io_types=keep_io,
                                                         node_block_list=list(block) or None)
            onnx.save(model, str(out))
            return "onnxruntime.transformers.float16 (onnxconverter_common's model does not load)"
    return make


def _int4(fp32: Path, out: Path, calib) -> None:
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    quant = MatMulNBitsQuantizer(onnx.load(str(fp32)), block_size=32, is_symmetric=True)
    quant.process()
    quant.model.save_model_to_file(str(out), False)


def _renamed(fp32: Path, out: Path, calib) -> None:
    """A re-export with other names: every node, intermediate tensor and initializer renamed (graph inputs
    and outputs kept), also where subgraphs (If/Loop bodies) read outer tensors."""
    import onnx
    model = onnx.load(str(fp32))
    g = model.graph
    keep = {v.name for v in g.input} | {v.name for v in g.output}
    rename: Dict[str, str] = {}
    for k, init in enumerate(g.initializer):
        if init.name not in keep:
            rename[init.name] = f"param_{k}"
    for k, node in enumerate(g.node):
        for o in node.output:
            if o and o not in keep:
                rename.setdefault(o, f"val_{k}_{len(rename)}")

    def apply(graph, top: bool) -> None:
        for k, node in enumerate(graph.node):
            node.name = f"node{'' if top else '_sub'}_{k}_{node.op_type.lower()}"
            node.input[:] = [rename.get(x, x) for x in node.input]
            node.output[:] = [rename.get(x, x) for x in node.output]
            for attr in node.attribute:
                if attr.g.node:
                    apply(attr.g, False)
                for sub in attr.graphs:
                    apply(sub, False)
        for coll in (graph.initializer, graph.value_info):
            for item in coll:
                item.name = rename.get(item.name, item.name)
    apply(g, True)
    onnx.save(model, str(out))


def make(variant: str, fp32: Path, pre: Path, out: Path, calib: Sequence[Sample]) -> str | None:
    """Write `variant` of the fp32 model (`pre`: its quant_pre_process output) to `out`; returns a note or None."""
    makers: Dict[str, Callable] = {
        "qdq_u8u8": lambda: _static(pre, out, calib, fmt="QDQ", act="QUInt8", weight="QUInt8", per_channel=False),
        "qdq_s8s8_pc": lambda: _static(pre, out, calib, fmt="QDQ", act="QInt8", weight="QInt8", per_channel=True),
        "qop": lambda: _qoperator(pre, out, calib),
        "dynamic": lambda: _dynamic(pre, out, calib),
        "fp16": lambda: _fp16(False)(fp32, out, calib),
        "fp16_io": lambda: _fp16(True)(fp32, out, calib),
        "int4": lambda: _int4(fp32, out, calib),
        "renamed": lambda: _renamed(fp32, out, calib),
    }
    return makers[variant]()


def rebuild(variant: str, fp32: Path, pre: Path, out: Path, calib: Sequence[Sample], *,
            nodes_to_exclude: Sequence[str] = (), node_block_list: Sequence[str] = (),
            extra_options: Optional[dict] = None) -> None:
    """`variant` made again by its own recipe with a fallback plan applied: `nodes_to_exclude` for the
    int8 QDQ variants (quantize_static), `node_block_list` for the fp16 ones (the zoo sweep checks that
    `mi compare --exclude-list` reproduces the plan's metrics this way)."""
    if variant in ("fp16", "fp16_io"):
        _fp16(variant == "fp16_io", node_block_list)(fp32, out, calib)
        return
    recipes = {"qdq_u8u8": dict(act="QUInt8", weight="QUInt8", per_channel=False),
               "qdq_s8s8_pc": dict(act="QInt8", weight="QInt8", per_channel=True)}
    if variant not in recipes:
        raise ValueError(f"no exclude-list recipe for variant {variant}")
    _static(pre, out, calib, fmt="QDQ", exclude=nodes_to_exclude, extra_options=extra_options, **recipes[variant])
