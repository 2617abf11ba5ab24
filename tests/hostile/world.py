"""The hostile world: every bad file of the matrix, built once in code (no downloads).

`build_world(folder)` writes models (good, hostile names, external-data attacks, models onnxruntime
refuses, a zero-node model, a 10^12-element input), sample files (good, truncated, corrupt,
pickled), and configs (alias bomb, non-UTF-8, ...), and returns name -> path.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Dict

import numpy as np
import onnx
from onnx import TensorProto, helper

from ..fixtures.helpers import affine_model, init, make_model, save, vi

H = TensorProto.FLOAT16
EVIL = "x\x1b]0;title\x07\x1b[2J\x1b[1A<img src=x onerror=alert(1)>|col\nFAIL: forged"


def _external(tensor: onnx.TensorProto, **entries: str) -> onnx.TensorProto:
    tensor.data_location = TensorProto.EXTERNAL
    for field in ("raw_data", "float_data", "int64_data"):
        tensor.ClearField(field)
    for key, value in entries.items():
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    return tensor


def _relu_model(inits=()) -> onnx.ModelProto:
    return make_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [1, 4])], [vi("y", [1, 4])],
                      list(inits))


def build_models(folder: Path) -> Dict[str, Path]:
    paths: Dict[str, Path] = {}

    def put(name: str, model: onnx.ModelProto) -> None:
        paths[name] = save(model, folder / f"{name}.onnx")

    put("m", affine_model(2.0, 1.0))
    put("m2", affine_model(2.0, 1.0))
    nodes = [helper.make_node("Log", ["inp"], [EVIL], name="n" + EVIL),
             helper.make_node("Relu", [EVIL], ["out"], name="relu")]
    put("evil", make_model(nodes, [vi("inp", [1, 4])], [vi("out", [1, 4])]))
    put("zero", make_model([], [vi("x", [1, 4])], [vi("x", [1, 4])]))
    put("huge", make_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [1000000, 1000000])],
                           [vi("y", [1000000, 1000000])]))
    # a model whose session takes a while to build (16 MB of weights, 8 MatMuls): an early error in
    # compare meets the sessions still being built on background threads (issue 28: exit 134)
    weight = init("W", np.random.default_rng(0).standard_normal((2048, 2048)).astype(np.float32))
    chain = [helper.make_node("MatMul", ["x" if i == 0 else f"t{i - 1}", "W"], [f"t{i}"], name=f"mm{i}")
             for i in range(8)]
    put("big", make_model(chain, [vi("x", ["N", 2048])], [vi("t7", ["N", 2048])], [weight]))
    put("big2", make_model(chain, [vi("x", ["N", 2048])], [vi("t7", ["N", 2048])], [weight]))
    (folder / "junk.onnx").write_bytes(b"junk, not a protobuf")
    paths["junk"] = folder / "junk.onnx"
    put("dyn", make_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", ["N", 4])], [vi("y", ["N", 4])]))
    # external-data attacks: every place a TensorProto can live
    (folder / "w.bin").write_bytes(b"\0" * 64)
    model = _relu_model()
    sparse = helper.make_sparse_tensor(init("sv", np.ones(2, np.float32)), init("si", np.array([0, 1], np.int64)), [4])
    _external(sparse.values, location="../../etc/passwd", offset="0", length="8")
    model.graph.sparse_initializer.append(sparse)
    put("ext_sparse", model)
    put("ext_nul", _relu_model([_external(init("w", np.ones(4, np.float32)), location="w.bin\x00/../../etc/passwd",
                                          offset="0", length="16")]))
    put("ext_offset", _relu_model([_external(init("w", np.ones(4, np.float32)), location="w.bin", offset="abc",
                                             length="16")]))
    put("ext_length", _relu_model([_external(init("w", np.ones(4, np.float32)), location="w.bin", offset="0",
                                             length="-5")]))
    put("ext_short", make_model([helper.make_node("Add", ["x", "w"], ["y"], name="a")], [vi("x", [1, 4])], [vi("y", [1, 4])],
                                [_external(init("w", np.ones((1, 4), np.float32)), location="w.bin", offset="3",
                                           length="8")]))  # inside the folder, but 8 bytes for 16
    const = helper.make_node("Constant", [], ["cval"], name="const",
                             value=_external(init("cv", np.ones(4, np.float32)), location="/etc/passwd", offset="0",
                                             length="16"))
    then = helper.make_graph([const, helper.make_node("Add", ["x", "cval"], ["t"], name="add")], "then", [],
                             [vi("t", [1, 4])])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"], name="id")], "else", [], [vi("e", [1, 4])])
    put("ext_subgraph", make_model([helper.make_node("If", ["cond"], ["y"], name="if", then_branch=then,
                                                     else_branch=other)],
                                   [vi("x", [1, 4])], [vi("y", [1, 4])], [init("cond", np.array(True))]))
    # models onnxruntime refuses
    put("dup", make_model([helper.make_node("Relu", ["x"], ["t"], name="a"), helper.make_node("Relu", ["x"], ["t"], name="b"),
                           helper.make_node("Relu", ["t"], ["y"], name="c")], [vi("x", [1, 4])], [vi("y", [1, 4])]))
    put("cycle", make_model([helper.make_node("Add", ["x", "u"], ["t"], name="a"), helper.make_node("Relu", ["t"], ["u"], name="b"),
                             helper.make_node("Relu", ["t"], ["y"], name="c")], [vi("x", [1, 4])], [vi("y", [1, 4])]))
    custom = make_model([helper.make_node("FancyOp", ["x"], ["y"], name="fancy", domain="com.evil")], [vi("x", [1, 4])],
                        [vi("y", [1, 4])])
    custom.opset_import.append(helper.make_opsetid("com.evil", 1))
    put("custom", custom)
    put("opset99", make_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [1, 4])], [vi("y", [1, 4])],
                              opset=99))
    # fp16 overflow: +Inf and -Inf outputs, whose float64 sum is NaN (numpy warns 'invalid value')
    nodes = [helper.make_node("Mul", ["x", "big"], ["m"], name="mul"), helper.make_node("Relu", ["m"], ["y"], name="relu"),
             helper.make_node("Neg", ["m"], ["z"], name="neg")]
    put("fp16", make_model(nodes, [vi("x", [1, 64], H)], [vi("y", [1, 64], H), vi("z", [1, 64], H)],
                           [init("big", np.array(60000, np.float16))]))
    # a tensor name that is not UTF-8 (protobuf hands such strings back as bytes)
    chained = make_model([helper.make_node("Relu", ["x"], ["QQ"], name="r1"), helper.make_node("Relu", ["QQ"], ["y"], name="r2")],
                         [vi("x", [1, 4])], [vi("y", [1, 4])])
    paths["non_utf8"] = folder / "non_utf8.onnx"
    paths["non_utf8"].write_bytes(chained.SerializeToString().replace(b"QQ", b"\x80\x80"))
    return paths


def build_samples(folder: Path) -> Dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths: Dict[str, Path] = {}
    good = folder / "good"
    good.mkdir()
    for i in range(2):
        np.savez(good / f"s{i:03d}.npz", x=np.full((1, 4), i, np.float32))
    paths["good_dir"] = good
    paths["empty_dir"] = folder / "empty"
    paths["empty_dir"].mkdir()
    paths["good_npz"] = good / "s000.npz"
    raw = (good / "s000.npz").read_bytes()
    for name, data in {"trunc10": raw[:10], "trunc_half": raw[: len(raw) // 2]}.items():
        paths[name] = folder / f"{name}.npz"
        paths[name].write_bytes(data)
    np.savez_compressed(folder / "c.npz", x=np.linspace(0, 1, 4000, dtype=np.float32).reshape(1000, 4))
    corrupt = bytearray((folder / "c.npz").read_bytes())
    corrupt[200] ^= 0xFF
    corrupt[300] ^= 0xFF
    paths["crc"] = folder / "crc.npz"
    paths["crc"].write_bytes(bytes(corrupt))
    np.save(folder / "a.npy", np.ones((1, 4), np.float32))
    npy = (folder / "a.npy").read_bytes()
    paths["npy_short"] = folder / "short.npy"
    paths["npy_short"].write_bytes(npy[:-3])
    paths["npy_5"] = folder / "five.npy"
    paths["npy_5"].write_bytes(npy[:5])
    np.savez(folder / "pickled.npz", x=np.array([{"a": 1}], dtype=object))
    paths["pickled"] = folder / "pickled.npz"
    paths["junk_pb"] = folder / "junk.pb"
    paths["junk_pb"].write_bytes(bytes(range(7, 37)))
    # NaN/Inf already in an input sample (item 17) and an earlier nan-bisect log (item 6)
    paths["nan_npz"] = folder / "nan_in.npz"
    np.savez(paths["nan_npz"], x=np.array([[1.0, np.nan, np.inf, 2.0]], np.float32))
    paths["old_jsonl"] = folder / "old.jsonl"
    paths["old_jsonl"].write_text("".join(f'{{"sample": "s{i:03d}.npz", "status": "clean"}}\n' for i in range(50)))
    # --golden folders (items 8, 11): a pickled output, a truncated archive, a junk TensorProto
    for name in ("golden_pickled", "golden_trunc", "golden_zoo_junk"):
        paths[name] = folder / name
        paths[name].mkdir()
    np.savez(paths["golden_pickled"] / "g.npz", x=np.ones((1, 4), np.float32), y=np.array([{"a": 1}], dtype=object))
    (paths["golden_trunc"] / "g.npz").write_bytes(raw[: len(raw) // 2])
    zoo = paths["golden_zoo_junk"] / "test_data_set_0"
    zoo.mkdir()
    (zoo / "input_0.pb").write_bytes(bytes(range(7, 37)))
    (zoo / "output_0.pb").write_bytes(bytes(range(7, 37)))
    return paths


def build_configs(folder: Path) -> Dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["version: 1", "a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]
    texts: Dict[str, bytes] = {
        "bomb": ("\n".join(lines) + "\n").encode(),
        "recursive": b"version: 1\ncompare: &a\n  x: *a\n",
        "latin1": b"version: 1\nvalidate:\n  fail-on: error # caf\xe9\n",
        "utf16": "version: 1\n".encode("utf-16"),
        "bom": b"\xef\xbb\xbfversion: 1\nvalidate:\n  fail-on: error\n",
        "badyaml": b"version: 1\nvalidate:\n  fail-on: [error\n",
        "tag": b"version: 1\nvalidate: !!python/object/apply:os.system ['echo pwned']\n",
        "list": b"- version\n- 1\n",
        "unknown": b"version: 1\nvalidat:\n  fail-on: error\n",
        "v2": b"version: 2\n",
        "ok": b"version: 1\n",
        "json_false": b"version: 1\nvalidate:\n  json: false\n",
        "nul": b"version: 1\nvalidate:\n  fail-on: err\x00or\n",
    }
    paths = {}
    for name, data in texts.items():
        paths[name] = folder / f"{name}.yaml"
        paths[name].write_bytes(data)
    return paths


def build_world(folder: Path) -> Dict[str, Path]:
    """Everything above in one folder, plus links to a model (a symlink and a hard link)."""
    world = {**build_models(folder), **build_samples(folder / "data"), **build_configs(folder / "cfg")}
    os.symlink(world["m"], folder / "link.onnx")
    os.link(world["m"], folder / "hard.onnx")
    world["link"] = folder / "link.onnx"
    world["hard"] = folder / "hard.onnx"
    world["dir"] = folder
    return world
