"""The ONNX backend test data of the installed onnx, written as `backend-test-tools generate-data` writes it.

Node cases come from onnx's own generators (`onnx.backend.test.case.node`: each op's `export*`
functions call `expect`, which records the model, its inputs and expected outputs); the model cases
the wheel ships (`onnx/backend/test/data/{simple,pytorch-operator,pytorch-converted,light}`) are
copied as they are, light models with the inputs onnx's own runner makes for them
(`Runner.generate_dummy_data`: arange / n) and their shipped expected output.

Each case folder holds `model.onnx`, `test_data_set_N/{input,output}_K.pb` and `case.json`
(kind, rtol, atol: the tolerance onnx's runner checks with).
"""
from __future__ import annotations

import importlib
import json
import shutil
import sys
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional

SHIPPED_KINDS = ("simple", "pytorch-operator", "pytorch-converted", "light")
DEFAULT_RTOL, DEFAULT_ATOL = 1e-3, 1e-7


def _write_value(path: Path, value: Any, value_type: Any, name: str) -> None:
    """One input/output file: the proto kind of the graph's declared type, as generate-data picks it."""
    from onnx import TensorProto, numpy_helper

    if value_type.HasField("map_type"):
        proto = numpy_helper.from_dict(value, name)
    elif value_type.HasField("sequence_type"):
        proto = numpy_helper.from_list(value, name)
    elif value_type.HasField("optional_type"):
        proto = numpy_helper.from_optional(value, name)
    elif isinstance(value, TensorProto):
        proto = value
    else:
        proto = numpy_helper.from_array(value, name)
    path.write_bytes(proto.SerializeToString())


def write_case(root: Path, case: Any) -> Path:
    """A node TestCase (model + data sets) as a case folder."""
    folder = root / case.kind / case.name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    (folder / "model.onnx").write_bytes(case.model.SerializeToString())
    graph = case.model.graph
    for index, (inputs, outputs) in enumerate(case.data_sets):
        data = folder / f"test_data_set_{index}"
        data.mkdir()
        for k, value in enumerate(inputs):
            _write_value(data / f"input_{k}.pb", value, graph.input[k].type, graph.input[k].name)
        for k, value in enumerate(outputs):
            _write_value(data / f"output_{k}.pb", value, graph.output[k].type, graph.output[k].name)
    (folder / "case.json").write_text(json.dumps({"kind": case.kind, "rtol": case.rtol, "atol": case.atol}))
    return folder


def node_cases(modules: Optional[Iterable[str]] = None) -> List[Any]:
    """onnx's node test cases: all of them (`collect_testcases()`), or only those that the named modules
    of `onnx.backend.test.case.node` generate when imported (e.g. 'cast', 'identity': seconds, not a minute)."""
    import numpy as np

    from onnx.backend.test.case import node

    with np.errstate(all="ignore"):  # the generators' own float overflows (cast.py) are expected
        if modules is None:
            return list(node.collect_testcases())
        before = len(node._NodeTestCases)
        for name in modules:
            importlib.import_module(f"onnx.backend.test.case.node.{name}")
        return list(node._NodeTestCases[before:])


def shipped_root() -> Path:
    import onnx

    return Path(onnx.__file__).parent / "backend" / "test" / "data"


def copy_shipped(root: Path, kinds: Iterable[str] = SHIPPED_KINDS) -> List[Path]:
    """The model cases the onnx wheel ships, as case folders (light models given onnx's dummy inputs)."""
    written: List[Path] = []
    tolerances = _light_tolerances()
    for kind in kinds:
        source = shipped_root() / kind
        if not source.is_dir():
            continue
        if kind == "light":
            for model in sorted(source.glob("light_*.onnx")):
                written.append(_light_case(root / kind, model, tolerances))
            continue
        for case in sorted(p for p in source.iterdir() if (p / "model.onnx").exists()):
            target = root / kind / case.name
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(case, target)
            (target / "case.json").write_text(json.dumps({"kind": kind, "rtol": DEFAULT_RTOL, "atol": DEFAULT_ATOL}))
            written.append(target)
    return written


def _light_tolerances() -> Dict[str, Any]:
    """Each light model's (rtol, atol) as onnx's model cases declare them (test_densenet121: rtol 2e-3)."""
    try:
        from onnx.backend.test.case import model as model_cases

        return {c.model_name: (c.rtol, c.atol) for c in model_cases.collect_testcases() if c.kind == "real"}
    except Exception:  # an onnx without them: the default tolerance
        return {}


def _light_case(root: Path, model_path: Path, tolerances: Dict[str, Any]) -> Path:
    import numpy as np
    import onnx
    from onnx import numpy_helper

    name = model_path.stem[len("light_"):]
    folder = root / f"test_{name}"
    if folder.exists():
        shutil.rmtree(folder)
    data = folder / "test_data_set_0"
    data.mkdir(parents=True)
    shutil.copy(model_path, folder / "model.onnx")
    model = onnx.load(str(model_path), load_external_data=False)
    initializers = {i.name for i in model.graph.initializer}
    inputs = [vi for vi in model.graph.input if vi.name not in initializers]
    for k, vi in enumerate(inputs):  # onnx's Runner.generate_dummy_data(random=False)
        shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in vi.type.tensor_type.shape.dim)
        count = int(np.prod(shape))
        value = (np.arange(count).reshape(shape) / count).astype(np.float32)
        (data / f"input_{k}.pb").write_bytes(numpy_helper.from_array(value).SerializeToString())
    for k in range(len(model.graph.output)):
        expected = model_path.with_name(f"{model_path.stem}_output_{k}.pb")
        if expected.exists():
            shutil.copy(expected, data / f"output_{k}.pb")
    rtol, atol = tolerances.get(name, (DEFAULT_RTOL, DEFAULT_ATOL))
    (folder / "case.json").write_text(json.dumps({"kind": "light", "rtol": rtol, "atol": atol}))
    return folder


def generate(root: Path, modules: Optional[Iterable[str]] = None, shipped: bool = True) -> List[Path]:
    """Every case (or the node cases of `modules` only, and the shipped ones when `shipped`) under `root`."""
    root.mkdir(parents=True, exist_ok=True)
    folders = [write_case(root, case) for case in node_cases(modules)]
    if shipped:
        folders += copy_shipped(root)
    return folders


if __name__ == "__main__":
    out = Path(sys.argv[1])
    chosen = sys.argv[2].split(",") if len(sys.argv) > 2 and sys.argv[2] else None
    print(len(generate(out, chosen)), "cases under", out)
