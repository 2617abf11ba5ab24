"""Every kind of HTML report opened in a real headless Chromium: no console errors, key parts visible.

Skipped (with the reason) only when Chromium or Playwright is missing outside CI; `.ci/run` installs
Chromium and sets MI_REQUIRE_BROWSER=1, which turns a missing browser into a failure.
"""
from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import Any, Iterator, Tuple

import numpy as np
import pytest

from inspector_cli.testing.models import build_cnn as cnn, image_samples, quantize_qdq

from ..fixtures.helpers import affine_model, invoke, save, save_npz

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = Path(os.environ.get("MI_ARTIFACTS", Path(__file__).resolve().parents[2] / "test-artifacts"))


def _browser_or_skip():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    missing = "chromium is not installed" if not CHROMIUM else ("playwright is not installed" if not sync_playwright else "")
    if missing:
        if os.environ.get("MI_REQUIRE_BROWSER"):
            pytest.fail(f"browser test required in CI but {missing}")
        pytest.skip(f"{missing} (apt-get install chromium; .ci/run does)")
    return sync_playwright


@pytest.fixture(scope="module")
def page():
    sync_playwright = _browser_or_skip()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run", "--disable-quic"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        yield page
        browser.close()


def open_report(page, path: Path):
    errors = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    requests = []
    page.on("request", lambda req: requests.append(req.url) if not req.url.startswith("file:") else None)
    page.goto(path.resolve().as_uri())
    page.wait_for_load_state("load")
    return errors, requests


def reports(tmp_path):
    a = save(affine_model(shape=(1, 8)), tmp_path / "a.onnx")
    b = save(affine_model(scale=1.1, shift=0.05, shape=(1, 8)), tmp_path / "b.onnx")
    data = save_npz(tmp_path / "data", [{"x": np.arange(8, dtype=np.float32)[None] * (i + 1)} for i in range(3)])
    made = {}
    invoke(["compare", a, b, "--inputs", data, "--max-abs", "0.1", "--json", tmp_path / "c.json"], exit_code=1)
    fp32, int8 = save(cnn(), tmp_path / "cnn.onnx"), None
    int8 = quantize_qdq(fp32, tmp_path / "cnn_int8.onnx", image_samples(4, seed=3))
    save_npz(tmp_path / "images", image_samples(3, seed=4))
    invoke(["compare", fp32, int8, "--inputs", tmp_path / "images", "--layers", "all", "--isolate", "worst:2",
            "--html", tmp_path / "compare.html"], exit_code=None)
    made["compare"] = tmp_path / "compare.html"
    invoke(["compare", a, a, "--inputs", data, "--json", tmp_path / "c0.json"])
    invoke(["report", tmp_path / "c0.json", tmp_path / "c.json", "--diff", "--html", tmp_path / "diff.html"],
           exit_code=1)
    made["report-diff"] = tmp_path / "diff.html"
    invoke(["profile", a, "--runs", "3", "--warmup", "1", "--html", tmp_path / "profile.html"])
    made["profile"] = tmp_path / "profile.html"
    invoke(["probe", a, "--inputs", data, "--select", "all", "--no-history", "--html", tmp_path / "probe.html"])
    made["probe"] = tmp_path / "probe.html"
    invoke(["validate", b, "--against", a, "--html", tmp_path / "validate.html"], exit_code=None)
    made["validate"] = tmp_path / "validate.html"
    from onnx import helper

    from ..fixtures.helpers import make_model, vi

    log_model = save(make_model([helper.make_node("Log", ["x"], ["y"], name="log")], [vi("x", [1, 8])],
                                [vi("y", [1, 8])]), tmp_path / "log.onnx")
    invoke(["nan-bisect", log_model, "--inputs", data, "--html", tmp_path / "nan.html"], exit_code=1)
    made["nan-bisect"] = tmp_path / "nan.html"
    return made


def test_every_report_kind_renders_cleanly(page, tmp_path):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for kind, path in reports(tmp_path).items():
        errors, requests = open_report(page, path)
        assert errors == [], f"{kind}: console errors {errors}"
        assert requests == [], f"{kind}: the report tried to load {requests}"
        assert page.locator("#overall").is_visible()
        section = page.locator(f"section[data-kind='{kind}']")
        assert section.is_visible()
        assert section.locator("[data-role=verdict]").is_visible()
        assert section.locator("table").first.is_visible()
        if kind == "compare":  # the layer charts with the first divergence marked
            assert section.locator("svg.line-chart").count() == 2
            assert section.locator("[data-role=first-divergence]").is_visible()
            # chart labels never overlap (worst layers next to each other used to draw over each other)
            boxes = page.evaluate("""[...document.querySelectorAll('svg.line-chart .marker-label')]
                .map(e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; })""")
            assert len(boxes) >= 4, boxes  # two charts, at least two labels each
            for i, (l1, t1, r1, b1) in enumerate(boxes):
                for l2, t2, r2, b2 in boxes[i + 1:]:
                    assert r1 <= l2 or r2 <= l1 or b1 <= t2 or b2 <= t1, f"labels overlap: {boxes}"
            # the verdict and the three key facts are above the fold of a 900 px window
            facts = section.locator("[data-role=key-facts] li")
            assert facts.count() == 3 and all(facts.nth(i).bounding_box()["y"] < 900 for i in range(3))
        # no horizontal scroll on a laptop-sized window
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1"), kind
        page.screenshot(path=str(ARTIFACTS / f"report-{kind}.png"), full_page=True)
        assert (ARTIFACTS / f"report-{kind}.png").stat().st_size > 10_000


def _softmax_swap(tmp_path: Path) -> Tuple[Path, Path]:
    """A two-layer transformer and the same with layer 1's Softmax replaced by HardSigmoid, saved."""
    from inspector_cli.testing.transformer import build_transformer

    from ..inspect.models import replace_op

    model = build_transformer(layers=2)
    return (save(model, tmp_path / "a.onnx"),
            save(replace_op(model, "layers.1.self_attn/Softmax", "HardSigmoid"), tmp_path / "b.onnx"))


@contextlib.contextmanager
def _scope_map_without_js(page: Any, report: Path) -> Iterator[Tuple[Any, Any]]:
    """`report` opened in a fresh context with scripts disabled: no errors, no requests, the scope map
    visible, no sideways scroll. Yields the page and the map; the context is closed after."""
    context = page.context.browser.new_context(java_script_enabled=False, viewport={"width": 1280, "height": 900})
    nojs = context.new_page()
    try:
        errors, requests = open_report(nojs, report)
        assert errors == [] and requests == []
        smap = nojs.locator(".smap")
        assert smap.is_visible()
        assert nojs.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
        yield nojs, smap
    finally:
        context.close()


def _collapse_layers(smap: Any) -> Any:
    """The 'layers' scope: open at first (the worst scope), closed by one click (the browser alone)."""
    layers = smap.locator("details:has(> summary b:text-is('layers'))").first
    assert layers.get_attribute("open") is not None
    layers.locator("> summary").click()
    assert layers.get_attribute("open") is None
    return layers


def test_scope_map_collapses_without_javascript(page, tmp_path):
    """The inspect map: nested <details> toggle with scripts disabled, SVG drawn, names escaped, no sideways scroll."""
    from ..inspect.models import hostile_model

    a, b = _softmax_swap(tmp_path)
    invoke(["inspect", a, "--diff", b, "--html", tmp_path / "map.html"])
    invoke(["inspect", hostile_model(tmp_path / "evil.onnx"), "--html", tmp_path / "evil.html"])
    with _scope_map_without_js(page, tmp_path / "map.html") as (nojs, smap):
        layers = _collapse_layers(smap)  # the worst scope (most FLOPs) is open
        layers.locator("> summary").click()
        assert layers.get_attribute("open") is not None
        assert smap.locator("svg.graph").count() >= 2 and smap.locator(".pair").count() >= 1
        assert smap.locator(".chg.on").first.is_visible()
        nojs.screenshot(path=str(ARTIFACTS / "report-inspect-map.png"), full_page=True)
        open_report(nojs, tmp_path / "evil.html")
        assert nojs.locator("script").count() == 0 and nojs.locator("img").count() == 0
        assert nojs.locator("svg.graph title", has_text="<script>").count() >= 1  # shown as text


def test_compare_map_side_by_side_without_javascript(page, tmp_path):
    """compare --layers: its map coloured by cosine, A and B drawn side by side, collapsible without JS."""
    a, b = _softmax_swap(tmp_path)
    invoke(["compare", a, b, "--layers", "all", "--shape", "input_ids:1x16", "--html", tmp_path / "cmp.html"])
    with _scope_map_without_js(page, tmp_path / "cmp.html") as (nojs, smap):
        assert "cosine" in smap.locator(".legend").inner_text()
        _collapse_layers(smap)  # the worst scope (lowest cosine) is open
        assert smap.locator(".pair svg.graph").count() == 2  # A and B of the model, side by side
        assert smap.locator(".chg.on").first.is_visible()  # 'replaced Softmax -> HardSigmoid'
        nojs.screenshot(path=str(ARTIFACTS / "report-compare-map.png"), full_page=True)
