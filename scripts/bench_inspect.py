#!/usr/bin/env python3
"""Benchmark `mi inspect`: whole-process seconds per 1,000 nodes at 5k, 20k and 50k nodes, and the
HTML map of a 6,000-node model (size, Chromium render time).

Models are generated: the package's BERT-style encoder block (~33 nodes per layer, dynamic batch
and sequence axes) repeated, with a small hidden size so the file stays small; node names carry
the module hierarchy (`layers.17.self_attn.q_proj/MatMul`). Targets (issue 17): under 3 s at 50k
nodes, linear cost; the 6,000-node map under 2 MB and rendered in under 2 s.

    .venv/bin/python scripts/bench_inspect.py [--sizes 5000,20000,50000] [--no-browser]
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import measure  # noqa: E402

NODES_PER_LAYER = 33


def make_model(nodes: int, folder: Path) -> Path:
    from inspector_cli.testing.transformer import build_transformer

    layers = max(1, round(nodes / NODES_PER_LAYER))
    model = build_transformer(layers=layers, hidden=16, heads=2, ffn=32, vocab=64)
    path = folder / f"enc_{len(model.graph.node)}.onnx"
    onnx.save(model, path)
    return path


def chromium_render_seconds(html: Path) -> float:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        start = time.perf_counter()
        page.goto(html.resolve().as_uri())
        page.wait_for_load_state("load")
        page.evaluate("document.body.getBoundingClientRect().height")  # force layout
        seconds = time.perf_counter() - start
        browser.close()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="5000,20000,50000")
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args()
    mi = str(Path(sys.executable).parent / "mi")
    with tempfile.TemporaryDirectory(prefix="mi-bench-inspect-") as tmp:
        folder = Path(tmp)
        print("nodes   wall s (table)   s/1k nodes   CPU s   CPU s/1k   peak RSS MiB   wall s (--json)   JSON MiB")
        for size in (int(s) for s in args.sizes.split(",")):
            path = make_model(size, folder)
            count = len(onnx.load(str(path), load_external_data=False).graph.node)
            run = measure([mi, "inspect", str(path)])
            assert run["code"] == 0, run["output"]
            with_json = measure([mi, "inspect", str(path), "--json", str(folder / "r.json")])
            assert with_json["code"] == 0, with_json["output"]
            print(f"{count:>6}   {run['wall']:>14.2f}   {run['wall'] / count * 1000:>10.3f}   {run['cpu']:>5.2f}"
                  f"   {run['cpu'] / count * 1000:>8.3f}   {run['rss_mib']:>12.0f}"
                  f"   {with_json['wall']:>15.2f}   {(folder / 'r.json').stat().st_size / 2**20:>8.1f}")
        path = make_model(6000, folder)
        html = folder / "map.html"
        run = measure([mi, "inspect", str(path), "--html", str(html)])
        assert run["code"] == 0, run["output"]
        print(f"HTML map of {len(onnx.load(str(path)).graph.node)} nodes: {html.stat().st_size / 2**20:.2f} MiB "
              f"(whole process {run['wall']:.2f} s)")
        if not args.no_browser:
            print(f"Chromium load + layout: {chromium_render_seconds(html):.2f} s")


if __name__ == "__main__":
    main()
