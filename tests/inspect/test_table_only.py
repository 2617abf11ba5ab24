"""`mi inspect` printed as a table builds the scope tree only to --depth (issue 17's 50,000-node target):
every scope it makes, and every table it prints, must equal the whole tree's."""
from __future__ import annotations

import dataclasses

import pytest

from inspector_cli.core.graph import ModelGraph, load_model
from inspector_cli.core.scope_tree import build_scope_tree
from inspector_cli.inspection.build import scope_map
from inspector_cli.inspection.config import InspectConfig
from inspector_cli.render.inspect_view import inspect_view
from inspector_cli.render.text import view_to_markdown
from inspector_cli.results.inspect import InspectTable
from inspector_cli.testing.models import build_cnn
from inspector_cli.testing.transformer import build_transformer
from inspector_cli.workflows.inspect import inspect_model

from ..fixtures.helpers import invoke, save
from .models import function_model, rename_like_paddle


def _graphs(tmp_path):
    return {"names": ModelGraph.from_proto(build_transformer(layers=3)),
            "structure": ModelGraph.from_proto(rename_like_paddle(build_cnn(blocks=2))),
            "functions": load_model(function_model(tmp_path / "f.onnx"))}


def _shown(info):
    """A scope's facts as the table uses them (children and the node lists stop at the cut)."""
    return dataclasses.replace(info, children=[])


@pytest.mark.parametrize("depth", [0, 1, 2, 3, 5])
def test_cut_tree_holds_the_whole_trees_scopes_to_depth(tmp_path, depth):
    for kind, graph in _graphs(tmp_path).items():
        whole_tree = build_scope_tree(graph)
        cut_tree = build_scope_tree(graph, depth=depth)
        whole = [_shown(s) for s in scope_map(graph, whole_tree).scopes if s.depth <= depth]
        cut = scope_map(graph, cut_tree, node_scopes=False)
        assert [_shown(s) for s in cut.scopes] == whole, kind
        assert cut.node_scope == {} and cut.source == whole_tree.source
        # the whole tree's counts, whatever the cut
        assert cut_tree.scope_count == whole_tree.scope_count == len(whole_tree.scopes()) - 1
        assert cut_tree.node_path == whole_tree.node_path and cut_tree.node_flops == whole_tree.node_flops


def test_transformer_scope_count():
    tree = build_scope_tree(ModelGraph.from_proto(build_transformer(layers=2)), depth=1)
    # every non-empty prefix of a node path is one scope of the whole tree
    paths = {p[:k] for p in tree.node_path.values() for k in range(1, len(p) + 1)}
    assert tree.scope_count == len(paths) and len(tree.root.children) == len({p[0] for p in paths})
    assert all(not child.children for child in tree.root.children.values())


@pytest.mark.parametrize("config", [InspectConfig(depth=1), InspectConfig(depth=3),
                                    InspectConfig(find="op:MatMul"), InspectConfig(node="layers.1.self_attn/Softmax")])
def test_table_only_result_prints_the_same_tables(config):
    graph = ModelGraph.from_proto(build_transformer(layers=2))
    whole = inspect_model(graph, config)
    table = inspect_model(graph, config, table_only=True)
    assert isinstance(table, InspectTable) and table.nodes == [] and not isinstance(whole, InspectTable)
    assert table.summary() == whole.summary()
    assert table.summary().startswith(f"{len(graph.nodes)} nodes in {len(whole.scope_map.scopes) - 1} scopes")
    assert view_to_markdown(inspect_view(table)) == view_to_markdown(inspect_view(whole))


def test_cli_table_equals_the_table_of_a_json_run(tmp_path):
    model = save(build_transformer(layers=2), tmp_path / "tr.onnx")
    plain = invoke(["inspect", model, "--depth", "2"]).stdout
    with_json = invoke(["inspect", model, "--depth", "2", "--json", tmp_path / "r.json"]).stdout
    assert plain == with_json and "nodes in" in plain


def test_the_inspect_kind_stays_the_whole_result():
    # InspectTable inherits `kind`; `mi report` must still read a saved inspect JSON as an InspectResult
    from inspector_cli.results.base import result_class
    from inspector_cli.results.inspect import InspectResult

    assert result_class("inspect") is InspectResult and InspectTable.kind == "inspect"
