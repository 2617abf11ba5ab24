"""Property-based fuzzing (hypothesis): mutated ONNX protobufs and generated YAML configs.

Whatever the input, `mi` ends with exit 0, 1, 2 or 3 (never 4, "a bug in mi"), prints no
traceback, and a usage or analysis error (2, 3) is exactly one `Error:` line. Examples are
bounded (derandomized, no deadline) so the file runs in well under a minute.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import List

import onnx
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ..fixtures.helpers import affine_model, invoke, save

# MI_FUZZ_EXAMPLES=500 (and MI_FUZZ_RANDOM=1 for fresh examples) fuzzes longer by hand.
FUZZ = settings(max_examples=int(os.environ.get("MI_FUZZ_EXAMPLES", "30")), deadline=None,
                derandomize=not os.environ.get("MI_FUZZ_RANDOM"), database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def assert_well_behaved(args: List[str], *, all_errors: bool = False) -> int:
    """`all_errors`: `mi config check` reports every problem, one `Error:` line each (by design)."""
    result = invoke(args, exit_code=None)
    out, err = result.stdout, result.stderr
    assert result.exit_code in (0, 1, 2, 3), f"exit {result.exit_code}: {err}"
    assert "Traceback" not in out + err and "Internal error" not in err, err
    if result.exit_code in (2, 3):
        errors = [line for line in err.splitlines() if line.startswith("Error:")]
        assert (len(errors) >= 1 if all_errors else len(errors) == 1), err
    return result.exit_code


# ---- ONNX protobuf mutations -------------------------------------------------------------------
SEED_MODEL = affine_model(2.0, 1.0).SerializeToString()

names = st.text(alphabet=st.characters(codec="utf-8"), max_size=12)
byte_edits = st.lists(st.tuples(st.integers(0, len(SEED_MODEL) - 1), st.integers(0, 255)), min_size=1, max_size=6)


@st.composite
def mutated_models(draw) -> bytes:
    """Raw byte edits and truncations, or a structured edit of one field of the ModelProto."""
    kind = draw(st.sampled_from(["bytes", "truncate", "insert", "structured"]))
    data = bytearray(SEED_MODEL)
    if kind == "bytes":
        for position, value in draw(byte_edits):
            data[position] = value
    elif kind == "truncate":
        data = data[:draw(st.integers(0, len(data) - 1))]
    elif kind == "insert":
        position = draw(st.integers(0, len(data)))
        data[position:position] = draw(st.binary(min_size=1, max_size=16))
    else:
        model = onnx.ModelProto()
        model.ParseFromString(SEED_MODEL)
        edit = draw(st.sampled_from(["node_name", "tensor_name", "dim", "dtype", "opset", "op_type", "ir", "drop_init"]))
        graph = model.graph
        if edit == "node_name":
            graph.node[draw(st.integers(0, len(graph.node) - 1))].name = draw(names)
        elif edit == "tensor_name":
            new = draw(names)
            graph.node[0].output[0] = new
            graph.node[1].input[0] = draw(st.sampled_from([new, "m", "x", ""]))
        elif edit == "dim":
            graph.input[0].type.tensor_type.shape.dim[1].dim_value = draw(st.integers(-3, 1 << 40))
        elif edit == "dtype":
            graph.input[0].type.tensor_type.elem_type = draw(st.integers(0, 25))
        elif edit == "opset":
            model.opset_import[0].version = draw(st.integers(-1, 200))
        elif edit == "op_type":
            graph.node[draw(st.integers(0, 1))].op_type = draw(st.sampled_from(["Relu", "Nope", "", "Mul\x1b[2J", "If"]))
        elif edit == "ir":
            model.ir_version = draw(st.integers(-1, 99))
        else:
            del graph.initializer[draw(st.integers(0, len(graph.initializer) - 1))]
        data = bytearray(model.SerializeToString())
    return bytes(data)


@FUZZ
@given(blob=mutated_models(), command=st.sampled_from(["validate", "nan-bisect", "probe", "inputs-make"]))
def test_mutated_models_never_crash(blob: bytes, command: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    folder = tmp_path_factory.mktemp("fuzz")
    path = folder / "m.onnx"
    path.write_bytes(blob)
    args = {"validate": ["-q", "validate", str(path)],
            "nan-bisect": ["-q", "nan-bisect", str(path)],
            "probe": ["-q", "probe", str(path), "--history-dir", str(folder / "h")],
            "inputs-make": ["-q", "inputs", "make", "-m", str(path), "-o", str(folder / "out")]}[command]
    assert_well_behaved(args)
    assert path.read_bytes() == blob


# ---- YAML configs --------------------------------------------------------------------------------
COMMANDS = ["validate", "compare", "probe", "nan-bisect", "profile", "defaults", "version", "steps", "inputs"]
keys = st.one_of(st.sampled_from(["fail-on", "min-cosine", "samples", "seed", "val-range", "shape", "json",
                                  "max-memory", "select", "disable", "runs", "name", "command", "model"]), names)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(), names,
                    st.sampled_from(["1e-3", "inf", "nan", "-1", "error", "1e400", "x:nan,nan", "x:1x99999999999"]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                      st.dictionaries(keys, inner, max_size=4)), max_leaves=12)
configs = st.dictionaries(st.sampled_from(COMMANDS), st.one_of(values, st.dictionaries(keys, values, max_size=5)),
                          max_size=4)


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return save(affine_model(), tmp_path_factory.mktemp("fuzzmodel") / "m.onnx")


@FUZZ
@given(document=configs, raw=st.one_of(st.none(), st.binary(max_size=64)), how=st.sampled_from(["-c", "check", "run"]))
def test_generated_configs_never_crash(document: dict, raw: bytes, how: str, model: Path,
                                       tmp_path_factory: pytest.TempPathFactory) -> None:
    path = tmp_path_factory.mktemp("cfg") / "c.yaml"
    text = yaml.safe_dump(document, allow_unicode=True).encode("utf-8")
    path.write_bytes(text + raw if raw is not None else text)
    args = {"-c": ["-q", "-c", str(path), "validate", str(model)],
            "check": ["-q", "config", "check", str(path)],
            "run": ["-q", "run", str(path)]}[how]
    assert_well_behaved(args, all_errors=how == "check")
