"""core/masks.py: which infinities are a mask's, on small graphs, and what probe and nan-bisect make of them."""
from __future__ import annotations

import numpy as np

from inspector_cli.core.graph import load_model
from inspector_cli.core.masks import find_masks

from ..fixtures.helpers import invoke, read_json, save_npz
from .mask_models import HEADS, L, additive_masks_model, causal, scores, where_mask_model


def probe(tmp_path, model, samples, exit_code):
    out = tmp_path / "probe.json"
    invoke(["probe", model, "--inputs", save_npz(tmp_path / "data", samples), "--no-history", "--json", out],
           exit_code=exit_code)
    doc = read_json(out)["results"]
    return {t["name"]: t for t in doc["tensors"]}, doc["findings"]


def bisect(tmp_path, model, samples, exit_code):
    out = tmp_path / "nb.json"
    invoke(["nan-bisect", model, "--inputs", save_npz(tmp_path / "nbdata", samples), "--json", out],
           exit_code=exit_code)
    return read_json(out)["results"]


def test_where_mask_is_found_with_its_nodes_and_positions(tmp_path):
    graph = load_model(where_mask_model(tmp_path / "m.onnx"))
    analysis = find_masks(graph)
    assert len(analysis.masks) == 1
    mask = analysis.masks[0]
    assert mask.constants == ("neginf",) and mask.fill == -np.inf
    assert mask.nodes == ("mask_where", "mask_add", "softmax") and mask.ends == ("softmax",)
    assert mask.tensors == ("m", "s") and analysis.pure == {"m"}  # m is the mask itself, s is data + mask
    allowed = causal()
    m = np.where(allowed, 0.0, -np.inf).astype(np.float32)
    x = scores()
    x[0, 1, 3, 0] = -np.inf  # an unmasked position: an overflow, not the mask's
    values = {"causal": allowed, "m": m, "s": x + m}
    where = analysis.positions("s", values)
    expected = np.broadcast_to(~allowed, (1, HEADS, L, L))
    assert where is not None and (where == expected).all()
    masked, known = analysis.masked_count("s", x + m, values)
    assert known and masked == HEADS * 6  # 6 masked positions per head of a 4x4 causal mask; not the overflow
    assert not analysis.only_masked("s", x + m, values)
    assert analysis.only_masked("s", scores() + m, values)


def test_probe_passes_a_where_mask_and_reports_it_once(tmp_path):
    # fails on the code before core/masks.py: exit 1, MI821 "tensor 'm' holds 0 NaN and 6 Inf"
    model = where_mask_model(tmp_path / "m.onnx")
    tensors, findings = probe(tmp_path, model, [{"scores": scores(s), "causal": causal()} for s in range(3)], 0)
    assert tensors["m"]["inf"] == 0 and tensors["m"]["masked"] == 3 * 6
    assert tensors["s"]["inf"] == 0 and tensors["s"]["masked"] == 3 * HEADS * 6
    info = [f for f in findings if f["rule"] == "MI829"]
    assert len(info) == 1 and info[0]["severity"] == "info"
    assert info[0]["data"]["nodes"] == ["mask_where", "mask_add", "softmax"]
    assert "mask of -inf from neginf through mask_where, mask_add to softmax" in info[0]["message"]
    assert not [f for f in findings if f["rule"] == "MI821"]


def test_probe_counts_an_overflow_beside_the_mask(tmp_path):
    # fails on the old code: s counted inf = 12 + 2 (the mask's and the overflows alike)
    x = scores()
    x[0, 0, 2, 1] = np.inf      # unmasked positions (row 2 may see columns 0..2)
    x[0, 1, 3, 0] = -np.inf
    tensors, findings = probe(tmp_path, where_mask_model(tmp_path / "m.onnx"), [{"scores": x, "causal": causal()}], 1)
    assert tensors["s"]["inf"] == 2 and tensors["s"]["masked"] == HEADS * 6
    assert tensors["p"]["nan"] == L  # the +inf row through Softmax: inf/inf
    assert {f["tensor"] for f in findings if f["rule"] == "MI821"} >= {"s", "p"}


def test_two_additive_masks_of_the_lowest_value_summing_to_minus_inf(tmp_path):
    # fails on the old code: 'pad_add' output holds -inf (lowest + lowest) where both masks mask: MI821, exit 1
    model = additive_masks_model(tmp_path / "a.onnx")
    analysis = find_masks(load_model(model))
    assert len(analysis.masks) == 1  # one connected mask: both constants reach the same Softmax
    assert set(analysis.masks[0].constants) == {"causal", "lowest"}
    am = np.array([[1, 1, 1, 0]], np.float32)  # the last key is padding
    tensors, findings = probe(tmp_path, model, [{"scores": scores(), "am": am}], 0)
    # positions masked by both: key 3 for queries 0..2 (causal above the diagonal too): 3 per head
    assert tensors["s"]["inf"] == 0 and tensors["s"]["masked"] == HEADS * 3
    assert [f["rule"] for f in findings if f["severity"] != "warning"] == ["MI829"]


def test_a_fully_masked_row_is_a_finding_in_probe_and_nan_bisect(tmp_path):
    model = where_mask_model(tmp_path / "m.onnx")
    sample = {"scores": scores(), "causal": causal(rows_open=False)}
    tensors, findings = probe(tmp_path, model, [sample], 1)
    assert tensors["p"]["nan"] == HEADS * L and tensors["p"]["masked_rows"] == HEADS
    rows = [f for f in findings if f["rule"] == "MI828"]
    assert len(rows) == 1 and rows[0]["tensor"] == "p" and "2 row(s) of Softmax 'softmax'" in rows[0]["message"]
    # fails on the old code: the origin was the -inf Constant itself (const_neginf, "corrupted-weight")
    doc = bisect(tmp_path, model, [sample], 1)
    origin = doc["records"][0]["origin"]
    assert origin["node"] == "softmax" and origin["hints"][0]["rule"] == "fully-masked-row"
    assert doc["static"] == []


def test_nan_bisect_passes_the_mask_and_finds_a_nan_weight_after_it(tmp_path):
    # fails on the old code: static listed the mask's -inf constant 'neginf' (MI901, exit 1 on a healthy model)
    healthy = where_mask_model(tmp_path / "ok.onnx", weight=np.eye(L))
    doc = bisect(tmp_path, healthy, [{"scores": scores(), "causal": causal()}], 0)
    assert doc["static"] == [] and [f["rule"] for f in doc["findings"]] == ["MI907"]
    assert doc["findings"][0]["data"]["constants"] == ["neginf"]
    w = np.eye(L)
    w[2, 1] = np.nan
    broken = where_mask_model(tmp_path / "nan.onnx", weight=w)
    doc = bisect(tmp_path / "b", broken, [{"scores": scores(), "causal": causal()}], 1)
    assert [s["tensor"] for s in doc["static"]] == ["w"]
    assert doc["records"][0]["origin"]["node"] == "head"


def test_full_scan_deep_reports_no_masked_origin_for_the_mask(tmp_path):
    # fails on the old code: --deep reported mask_where as a masked origin (MI903, status 'masked', exit 1)
    model = where_mask_model(tmp_path / "m.onnx")
    out = tmp_path / "deep.json"
    invoke(["nan-bisect", model, "--inputs", save_npz(tmp_path / "d", [{"scores": scores(), "causal": causal()}]),
            "--deep", "--json", out], exit_code=0)
    doc = read_json(out)["results"]
    assert doc["masked"] == 0 and doc["nonfinite"] == 0


def test_break_on_inf_ignores_the_mask_but_not_an_overflow(tmp_path):
    # fails on the old code: --break-on inf met on sample 0 by the mask 'm' (exit 1)
    model = where_mask_model(tmp_path / "m.onnx")
    x = scores(1)
    x[0, 0, 3, 3] = np.inf  # the diagonal: never masked
    data = save_npz(tmp_path / "brk", [{"scores": scores(0), "causal": causal()}, {"scores": x, "causal": causal()}])
    out = tmp_path / "brk.json"
    invoke(["probe", model, "--inputs", data, "--no-history", "--break-on", "inf", "--json", out], exit_code=1)
    trigger = read_json(out)["results"]["trigger"]
    assert trigger["sample_index"] == 1 and trigger["tensor"] == "s" and trigger["values"] == {"inf": 1.0}


def test_eager_where_of_the_lowest_value_with_nodes_named_like_their_outputs(tmp_path):
    # eager GPT-2: Where(causal, scores, finfo.min); onnx.helper graphs often name a node after its output
    from onnx import helper, numpy_helper

    from ..fixtures.helpers import make_model, save, vi
    from .mask_models import LOWEST

    nodes = [helper.make_node("Constant", [], ["low"], name="low",
                              value=numpy_helper.from_array(np.array(LOWEST, np.float32), "low")),
             helper.make_node("Where", ["causal", "scores", "low"], ["w"], name="w"),
             helper.make_node("Softmax", ["w"], ["p"], name="p", axis=-1)]
    model = save(make_model(nodes, [vi("scores", [1, HEADS, L, L]), vi("causal", [1, 1, L, L], 9)],
                            [vi("p", [1, HEADS, L, L])]), tmp_path / "eager.onnx")
    analysis = find_masks(load_model(model))
    assert [(m.constants, m.nodes, m.tensors) for m in analysis.masks] == [(("low",), ("w", "p"), ("w",))]
    x = scores()
    w = np.where(causal(), x, np.float32(LOWEST))
    where = analysis.positions("w", {"causal": causal(), "w": w})
    assert where is not None and (where == np.broadcast_to(~causal(), w.shape)).all()
    tensors, findings = probe(tmp_path, model, [{"scores": x, "causal": causal()}], 0)
    assert tensors["w"]["inf"] == tensors["w"]["masked"] == 0  # a finite fill: nothing to count, found all the same
    assert [f["rule"] for f in findings if f["severity"] == "info"] == ["MI829"]


def test_probe_takes_a_masks_condition_from_the_sample(tmp_path):
    # Where(causal, scores, -inf) with `causal` a graph input: the positions need the sample's own value,
    # so an overflow's -inf in the same tensor is told apart (without it every -inf would count as masked)
    from onnx import helper

    from ..fixtures.helpers import make_model, save, vi
    from .mask_models import _constant

    nodes = [_constant("neginf", -np.inf), helper.make_node("Where", ["causal", "scores", "neginf"], ["w"], name="mask"),
             helper.make_node("Softmax", ["w"], ["p"], name="softmax", axis=-1)]
    model = save(make_model(nodes, [vi("scores", [1, HEADS, L, L]), vi("causal", [1, 1, L, L], 9)],
                            [vi("p", [1, HEADS, L, L])]), tmp_path / "w.onnx")
    x = scores()
    x[0, 1, 3, 0] = -np.inf  # unmasked (row 3 sees columns 0..3)
    tensors, findings = probe(tmp_path, model, [{"scores": x, "causal": causal()}], 1)
    assert tensors["w"]["masked"] == HEADS * 6 and tensors["w"]["inf"] == 1
    assert [f["tensor"] for f in findings if f["rule"] == "MI821"] == ["w"]


def test_an_overflow_on_the_mask_path_is_the_origin_not_the_mask(tmp_path):
    # s = scores + Where(causal, 0, -inf); t = s * 1.5e38 + 1.5e38 overflows to +inf where unmasked (s >= 2);
    # Softmax: NaN. (Both constants stay below half the float32 range: no fills themselves.)
    # fails on the old code: the origin was the mask's Constant (const_neginf), where the first -inf appears
    from onnx import helper

    from ..fixtures.helpers import make_model, save, vi
    from .mask_models import _constant

    nodes = [_constant("zero", 0.0), _constant("neginf", -np.inf), _constant("big", 1.5e38), _constant("shift", 1.5e38),
             helper.make_node("Where", ["causal", "zero", "neginf"], ["m"], name="mask_where"),
             helper.make_node("Add", ["scores", "m"], ["s"], name="mask_add"),
             helper.make_node("Mul", ["s", "big"], ["u"], name="scale"),
             helper.make_node("Add", ["u", "shift"], ["t"], name="shift_add"),
             helper.make_node("Softmax", ["t"], ["p"], name="softmax", axis=-1)]
    model = save(make_model(nodes, [vi("scores", [1, HEADS, L, L]), vi("causal", [1, 1, L, L], 9)],
                            [vi("p", [1, HEADS, L, L])]), tmp_path / "o.onnx")
    x = np.float32(2.0) + np.float32(0.1) * np.clip(np.abs(scores()), 0, 1)  # 1.5e38 x stays finite
    doc = bisect(tmp_path, model, [{"scores": x, "causal": causal()}], 1)
    origin = doc["records"][0]["origin"]
    assert origin["node"] == "shift_add"
    assert doc["static"] == []


def test_a_stored_causal_buffer_sliced_cast_and_expanded_is_a_mask(tmp_path):
    # old exports keep a [1, 1, 8, 8] float buffer of 0/-inf, Slice it to the sequence, Cast and Expand it.
    # fails on the old code: static MI901 on 'buffer' (28 Inf) and probe MI821 on each of its copies
    from onnx import helper

    from ..fixtures.helpers import init, make_model, save, vi

    buffer = np.triu(np.full((8, 8), -np.inf, np.float32), k=1)[None, None]
    nodes = [helper.make_node("Slice", ["buffer", "starts", "ends", "axes"], ["sliced"], name="slice"),
             helper.make_node("Cast", ["sliced"], ["cast"], name="cast", to=1),
             helper.make_node("Expand", ["cast", "shape"], ["expanded"], name="expand"),
             helper.make_node("Add", ["scores", "expanded"], ["s"], name="add"),
             helper.make_node("Softmax", ["s"], ["p"], name="softmax", axis=-1)]
    inits = [init("buffer", buffer), init("starts", np.array([0, 0], np.int64)), init("ends", np.array([L, L], np.int64)),
             init("axes", np.array([2, 3], np.int64)), init("shape", np.array([1, HEADS, L, L], np.int64))]
    model = save(make_model(nodes, [vi("scores", [1, HEADS, L, L])], [vi("p", [1, HEADS, L, L])], inits),
                 tmp_path / "buffer.onnx")
    analysis = find_masks(load_model(model))
    assert [m.nodes for m in analysis.masks] == [("slice", "cast", "expand", "add", "softmax")]
    assert analysis.pure == {"sliced", "cast", "expanded"}
    tensors, findings = probe(tmp_path, model, [{"scores": scores()}], 0)
    assert [tensors[t]["masked"] for t in ("sliced", "cast", "expanded", "s")] == [6, 6, 6 * HEADS, 6 * HEADS]
    assert bisect(tmp_path, model, [{"scores": scores()}], 0)["static"] == []


def test_an_infinite_clamp_bound_is_no_weight_defect(tmp_path):
    # Min(x, +inf) and Max(x, -inf): no-op clamps exporters write for an open bound.
    # fails on the old code: static MI901 on both bounds (exit 1)
    from onnx import helper

    from ..fixtures.helpers import make_model, save, vi
    from .mask_models import _constant

    nodes = [_constant("posinf", np.inf), _constant("neginf", -np.inf),
             helper.make_node("Min", ["x", "posinf"], ["lo"], name="clamp_high"),
             helper.make_node("Max", ["lo", "neginf"], ["y"], name="clamp_low")]
    model = save(make_model(nodes, [vi("x", [1, 4])], [vi("y", [1, 4])]), tmp_path / "clamp.onnx")
    analysis = find_masks(load_model(model))
    assert [m.ends for m in analysis.masks] == [("clamp_high", "clamp_low")]  # one chain: one mask
    assert set(analysis.masks[0].constants) == {"posinf", "neginf"}
    doc = bisect(tmp_path, model, [{"x": np.arange(4, dtype=np.float32)[None]}], 0)
    assert doc["static"] == [] and [f["rule"] for f in doc["findings"]] == ["MI907"]
    # a NaN bound is no clamp: still a defect
    nodes[0] = _constant("posinf", np.nan)
    broken = save(make_model(nodes, [vi("x", [1, 4])], [vi("y", [1, 4])]), tmp_path / "nan.onnx")
    doc = bisect(tmp_path / "n", broken, [{"x": np.arange(4, dtype=np.float32)[None]}], 1)
    assert [s["tensor"] for s in doc["static"]] == ["posinf"]
