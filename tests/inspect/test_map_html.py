"""The HTML map: structure, colouring by another metric, escaping of hostile names."""
from __future__ import annotations

import re

from inspector_cli.testing.transformer import build_transformer

from ..fixtures.helpers import invoke, read_json, save
from .models import hostile_model


def test_map_is_nested_details_with_drawings(tmp_path):
    model = save(build_transformer(layers=2), tmp_path / "tr.onnx")
    invoke(["inspect", model, "--html", tmp_path / "m.html", "--json", tmp_path / "m.json"])
    html = (tmp_path / "m.html").read_text()
    assert "<script" not in html
    start = html.index('<div class="smap">')
    section = html[start:]
    assert "Colour: flops" in section
    # every scope is one <details>: the model, embeddings, layers, 2 x 16 in the layers, final_norm
    scopes = read_json(tmp_path / "m.json")["results"]["scope_map"]["scopes"]
    assert len(scopes) == 36 and section.count("<details") == 36
    # one drawing per largest scope of at most 150 nodes: here the whole model, each node once
    nodes = read_json(tmp_path / "m.json")["results"]["nodes"]
    assert len(nodes) == 73
    assert section.count('<svg class="graph"') == 1 and section.count('<g class="gn') == 73
    invoke(["report", tmp_path / "m.json", "--html", tmp_path / "m2.html", "--map", "activation_bytes"])
    assert "Colour: activation_bytes" in (tmp_path / "m2.html").read_text()
    result = invoke(["report", tmp_path / "m.json", "--html", tmp_path / "m3.html", "--map", "cosine"], exit_code=2)
    assert "activation_bytes, flops" in result.output


def test_hostile_names_are_escaped(tmp_path):
    path = hostile_model(tmp_path / "evil.onnx")
    invoke(["inspect", path, "--html", tmp_path / "e.html"])
    html = (tmp_path / "e.html").read_text()
    assert "<script>alert" not in html and "<img" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert re.search(r"b&amp;amp;&#34;quote&#39;|b&amp;amp;&quot;quote", html)
