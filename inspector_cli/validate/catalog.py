"""Every validate rule: stable ID, name, default severity, title and help. Pure data.

IDs are a public contract (CI configs disable or re-level them): never reuse or renumber one.
MI1xx loading, MI2xx checker and shapes, MI3xx graph integrity, MI4xx runtime support,
MI5xx quantisation, MI6xx optimisation hints, MI7xx `--against` structure (MI8xx: compare).
"""
from __future__ import annotations

from typing import Dict, List

from ..results.base import Severity
from ..results.validate import RuleInfo

E, W, I = Severity.ERROR, Severity.WARNING, Severity.INFO

FAMILIES: Dict[str, str] = {
    "1": "loading", "2": "checker", "3": "integrity", "4": "runtime", "5": "quantisation", "6": "hints",
    "7": "against",
}

_RULES = [
    # ---- MI1xx loading: the file itself is the defect -------------------------------------------
    ("MI101", "EmptyFile", E, "The model file is empty",
     "The file has 0 bytes: an interrupted download, copy or export. Re-export or re-copy the model."),
    ("MI102", "NotProtobuf", E, "The file is not an ONNX protobuf",
     "The bytes do not decode as an ONNX ModelProto. Check that the file is an .onnx model (not a "
     "TensorFlow, TFLite or PyTorch file) and that it was copied in binary mode."),
    ("MI103", "TextFile", E, "The file is text, not a binary ONNX model",
     "The file starts with readable text: a Git LFS pointer (run 'git lfs pull'), an HTML error page "
     "saved by a download, JSON, or a text-format protobuf (convert it with onnx.parser or protobuf's "
     "text_format)."),
    ("MI104", "Truncated", E, "The file is truncated",
     "A protobuf field declares more bytes than the file holds: the copy or download stopped early. "
     "Compare the size with the original and copy it again."),
    ("MI105", "IrVersion", E, "IR version missing or newer than supported",
     "The model's ir_version is 0 (not set) or newer than the installed onnx supports. Re-export with a "
     "supported IR version, or upgrade onnx and onnxruntime. Checker and runtime rules are skipped."),
    ("MI106", "IrTooOldForOpset", W, "IR version too old for the declared opset",
     "Each opset release needs a minimum IR version (onnx.helper.VERSION_TABLE). Tools that check it "
     "refuse the model; set ir_version to at least the value the message gives."),
    ("MI107", "NoGraph", E, "Parsed, but holds no graph or no opset import",
     "The protobuf parsed, but the model has no graph or declares no opset: the file is not a usable "
     "ONNX model (or was cut exactly between two fields)."),
    ("MI108", "ExternalDataMissing", E, "External data file missing or too short",
     "A tensor stores its data in an external file that is not next to the model, or is shorter than "
     "the tensor needs. Copy the .data file(s) with the model, keeping relative paths."),
    ("MI109", "ExternalDataOutside", E, "External data outside the model's folder",
     "An external-data location is absolute or climbs out of the model's folder (../). mi refuses to "
     "read it (a model must not make tools read arbitrary files); re-save with the data beside the model."),
    ("MI110", "ExternalDataMalformed", E, "External data offset or length is not a number",
     "An external-data entry's offset or length is not a non-negative integer (text, a sign, an "
     "exponent): the file cannot be read at a defined place, so mi refuses it. The file is where it "
     "should be; the model's external_data entries are corrupt: re-save the model with onnx."),
    # ---- MI2xx checker and shapes ----------------------------------------------------------------
    ("MI201", "CheckerError", E, "onnx.checker rejects the model",
     "onnx.checker.check_model reports a violation of the ONNX specification (bad attribute, bad "
     "tensor, bad graph). The finding names its node or tensor. Where onnxruntime loads the model anyway "
     "it is a warning (the message says so; --strict keeps the error); a graph input or output with a type "
     "but no shape field (or an output with no type), as onnx-graphsurgeon and Polygraphy write them, is a "
     "note: onnxruntime infers it. The checker then runs on a copy that has the field, so its next "
     "message is reported too."),
    ("MI202", "ShapeConflict", E, "Shapes conflict at a node",
     "Strict shape inference found inputs whose shapes cannot meet (e.g. an Add of [1,64,56,56] and "
     "[1,32,56,56], a skip connection joined with the wrong shape). The message gives the input shapes."),
    ("MI203", "TypeConflict", E, "Element types conflict at a node",
     "An input's element type is not allowed by the operator or disagrees with its other inputs "
     "(e.g. Add of float32 and int64). Insert a Cast or fix the export."),
    ("MI204", "DeclaredShapeMismatch", E, "Declared shape disagrees with the inferred one",
     "A graph output or value_info declares a shape that shape inference contradicts. Fix or remove "
     "the declaration (stale value_info after graph surgery is the usual cause). onnxruntime keeps the "
     "inferred shape: when it loads the model this is a warning (--strict: error)."),
    ("MI205", "UnknownOperator", E, "Operator not defined in the declared opset",
     "No operator of this name exists in the declared opset of its domain (a typo, an op added in a "
     "later opset, or a custom op placed in the default domain). An op onnxruntime registers a kernel for "
     "in that domain (SimplifiedLayerNormalization, as onnxruntime-genai's builder writes it) is a warning "
     "when onnxruntime loads the model: other runtimes may refuse it (--strict: error)."),
    ("MI206", "MissingOpsetImport", E, "Node domain without an opset import",
     "A node uses a domain the model does not import in opset_import; add the import."),
    ("MI207", "OpsetTooNew", W, "Opset newer than the installed onnx knows",
     "The default-domain opset is newer than the installed onnx package: checks use an older "
     "operator set and runtimes may refuse the model."),
    ("MI210", "OutputShapeUnknown", W, "Graph output with unknown type, rank or dimensions",
     "After shape inference a graph output still has no element type, no rank, or dimensions that are "
     "neither a size nor a named symbol; deployment compilers (TensorRT, NPU toolchains) need them to "
     "allocate outputs. Declare them at export (dynamic_axes names)."),
    # ---- MI3xx graph integrity -----------------------------------------------------------------
    ("MI301", "DanglingInput", E, "Node input that nothing produces",
     "A node reads a tensor that is not a graph input, an initializer or any node's output (a broken "
     "graph edit). The model cannot run."),
    ("MI302", "DuplicateTensor", E, "Tensor name produced twice",
     "ONNX graphs are single-assignment: a tensor name is produced by one node only and never shadows "
     "a graph input or initializer."),
    ("MI303", "OutputNotProduced", E, "Graph output never produced",
     "A graph output names a tensor that no node produces and that is not an input or initializer."),
    ("MI304", "UnusedInitializer", W, "Unused initializer",
     "An initializer no node reads: dead weight in the file. Remove it (onnx's optimizer or "
     "onnxsim do)."),
    ("MI305", "UnusedInput", W, "Unused graph input",
     "A graph input no node reads; callers must still feed it. Remove it unless the interface must "
     "stay fixed."),
    ("MI306", "DeadNode", W, "Node that feeds no graph output",
     "The node's results never reach a graph output: wasted work, often a leftover of graph surgery."),
    ("MI307", "UnnamedNode", I, "Unnamed nodes",
     "Nodes without names are hard to locate in reports and profiles; mi names them <OpType>_<index>."),
    ("MI308", "DuplicateNodeName", E, "Duplicate node names",
     "Several nodes of one graph share a name: onnxruntime refuses to load the model ('two nodes with same "
     "node name'), and reports, profiles and tools that address nodes by name are ambiguous. Commands that "
     "run the model stop (exit 3) unless --rename-duplicate-nodes asks them to analyse a copy with the later "
     "ones renamed <name>_<index>."),
    ("MI309", "Cycle", E, "The graph has a cycle",
     "Nodes depend on each other in a loop; ONNX graphs must be acyclic (use Loop for iteration)."),
    ("MI310", "NotTopologicallySorted", W, "Nodes are not in topological order",
     "ONNX requires nodes to be listed after the producers of their inputs; onnxruntime sorts, other "
     "tools may not. Re-save after sorting."),
    ("MI311", "InitializerAsInput", I, "Initializer also listed as a graph input",
     "A weight that is also a graph input can be overridden by callers, so runtimes cannot constant-fold "
     "it. Remove it from graph.input unless overriding is intended (IR >= 4)."),
    # ---- MI4xx runtime support -----------------------------------------------------------------
    ("MI401", "NoKernel", E, "onnxruntime has no kernel for this node",
     "The installed onnxruntime (on the chosen providers) implements no kernel for this operator, "
     "opset version and input types. Change the types (e.g. Cast around it), the opset, or the runtime."),
    ("MI402", "RuntimeVersion", E, "Opset or IR version beyond the installed onnxruntime",
     "The model is stamped with an opset or IR version the installed onnxruntime does not support. "
     "Upgrade onnxruntime or re-export with an older opset."),
    ("MI403", "CustomDomain", E, "Custom-op domain without a registered library",
     "Nodes use a domain onnxruntime does not know and no --custom-op-lib provides it; the model "
     "cannot run without the custom-op library."),
    ("MI404", "SessionFailed", E, "onnxruntime cannot create a session",
     "onnxruntime refused the model; the message is onnxruntime's, mapped to the node it names."),
    ("MI405", "DynamicInput", I, "Input with dynamic dimensions",
     "Symbolic or unknown input dimensions: compare, probe and profile need --shape to fix them, and "
     "some runtimes compile slower or not at all."),
    ("MI406", "Float64", W, "float64 tensors",
     "float64 is slow or unsupported on GPUs, NPUs and edge runtimes, and doubles memory; it is "
     "usually an export accident (numpy defaults). Use float32."),
    ("MI407", "NonFiniteWeight", E, "Initializer holds NaN or Inf",
     "A weight contains NaN or Inf; every output it reaches is poisoned."),
    ("MI408", "LargeInitializer", I, "Very large initializer",
     "A single initializer above --large-initializer-mb: slow to load and copy; store it as external "
     "data, or check that it is not an accidental constant (a folded broadcast)."),
    ("MI409", "Over2GB", E, "Model over 2 GB without external data",
     "Protobuf cannot serialise more than 2 GB: most tools fail to load or save this model. Save it with "
     "onnx.save(..., save_as_external_data=True)."),
    # ---- MI5xx quantisation --------------------------------------------------------------------
    ("MI501", "ScaleNotPositive", E, "Quantisation scale <= 0",
     "A scale must be positive: zero divides by zero when quantising, negative flips the sign."),
    ("MI502", "ScaleNonFinite", E, "Quantisation scale is NaN or Inf",
     "A NaN or Inf scale turns every quantised value into garbage (calibration on NaN data is the "
     "usual cause)."),
    ("MI503", "ScaleDenormal", E, "Quantisation scale is denormal",
     "A scale below the smallest normal float of its type: x / scale overflows and many hardware "
     "paths flush it to zero. The calibration range collapsed to (almost) a point."),
    ("MI504", "ZeroPointRange", E, "Zero point outside its type's range",
     "The zero point does not fit the quantised type's range (e.g. 200 for int8 [-128, 127]), or its "
     "type disagrees with the quantised data's type."),
    ("MI505", "BadAxis", E, "Invalid per-channel axis",
     "A per-channel scale needs an axis inside the tensor's rank and one value per element along it."),
    ("MI506", "QdqMismatch", E, "QuantizeLinear -> DequantizeLinear pair with different parameters",
     "A Q -> DQ pair must share scale, zero point and axis, else every value is silently rescaled."),
    ("MI507", "InputRangeSaturates", E, "Input quantisation does not cover the declared input range",
     "The input QuantizeLinear represents [scale*(qmin-zp), scale*(qmax-zp)], narrower than the range "
     "given with --input-range: values outside saturate. Recalibrate with representative data (e.g. "
     "pixels 0..255 vs normalised 0..1)."),
    ("MI508", "InputRangeWasteful", W, "Input quantisation uses few of its levels",
     "The declared input range covers under 10% of the quantised levels: most precision is wasted; "
     "the calibration data were wider than real inputs."),
    ("MI509", "WeightMismatch", E, "Dequantised weight differs from the float weight",
     "With --against, a dequantised weight has an SQNR under 10 dB against the float weight (or another "
     "shape): a wrong scale, a transposed or a different tensor, not rounding."),
    ("MI510", "WeightLowSqnr", W, "Weight quantisation loses precision",
     "With --against, a dequantised weight's SQNR is below --min-weight-sqnr: consider per-channel "
     "quantisation or keeping this layer in float."),
    ("MI511", "FloatComputeInQuantised", I, "Compute ops left in float in a quantised model",
     "Some Conv/MatMul/Gemm nodes of a quantised model are not fed by DequantizeLinear (they run in "
     "float): intended exclusions, or layers the quantiser skipped."),
    # ---- MI6xx optimisation hints ----------------------------------------------------------------
    ("MI601", "ConvBatchNorm", I, "Conv -> BatchNormalization not folded",
     "BatchNormalization after Conv/Gemm/MatMul can be folded into the weights."),
    ("MI602", "TransposePair", I, "Transpose pair that cancels",
     "Two Transposes whose permutations compose to the identity: remove both."),
    ("MI603", "ReshapeChain", I, "Reshape chain",
     "Reshape/Flatten/Squeeze/Unsqueeze feeding another one: a single Reshape suffices."),
    ("MI604", "CastRoundTrip", I, "Cast round-trip",
     "Cast to a type and straight back: remove both unless the precision loss is intended."),
    ("MI605", "IdentityNode", I, "Identity node",
     "Identity does nothing at run time; remove it."),
    ("MI606", "ConstantSubgraph", I, "Constant subgraph that could be folded",
     "A node whose inputs are all constants computes a constant at every run: fold it."),
    # ---- MI7xx --against structure ---------------------------------------------------------------
    ("MI701", "OpDropped", W, "Op type of the reference missing",
     "An op type of the --against model is absent from this one (e.g. Softmax replaced or removed)."),
    ("MI702", "OpAdded", I, "Op type not in the reference",
     "An op type appears that the --against model does not have."),
    ("MI703", "IoMissing", E, "Input or output missing or renamed",
     "An input or output of one model has no same-named counterpart in the other: not a drop-in "
     "replacement (compare needs --map)."),
    ("MI704", "IoDiffers", W, "Input or output type or shape differs",
     "A same-named input or output has another element type or shape in the two models."),
    ("MI705", "OpCountChanged", I, "Op count changed",
     "An op type present in both models occurs a different number of times (fusion, or a lost layer)."),
    ("MI706", "OpFolded", I, "Op type folded away or replaced by its quantised form",
     "BatchNormalization, Dropout or Identity of the reference are absent (folded by optimisation), "
     "Relu/Clip in a quantised model (absorbed by the QuantizeLinear after them), or float ops replaced "
     "by their QOperator forms (Conv by QLinearConv): as expected."),
]

RULES: Dict[str, RuleInfo] = {
    rid: RuleInfo(id=rid, name=name, family=FAMILIES[rid[2]], severity=sev, title=title, help=help_text)
    for rid, name, sev, title, help_text in _RULES
}


def all_rules() -> List[RuleInfo]:
    return list(RULES.values())


def rule(rule_id: str) -> RuleInfo:
    return RULES[rule_id]


def family_of(rule_id: str) -> str:
    return FAMILIES[rule_id[2]]


def expand_pattern(pattern: str) -> List[str]:
    """Rule IDs named by 'MI305', 'MI3xx' (a family) or a family name ('hints'); [] when none."""
    text = pattern.strip()
    upper = text.upper()
    if upper in RULES:
        return [upper]
    if len(upper) == 5 and upper.startswith("MI") and upper.endswith("XX"):
        return [r for r in RULES if r[2] == upper[2]]
    if text.lower() in FAMILIES.values():
        return [r for r in RULES if family_of(r) == text.lower()]
    return []
