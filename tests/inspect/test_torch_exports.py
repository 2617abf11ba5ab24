"""Scope trees of real torch exports match the module hierarchy they came from."""
from __future__ import annotations

import re
import warnings

import pytest

from inspector_cli.core.graph import load_model
from inspector_cli.core.scope_tree import build_scope_tree

torch = pytest.importorskip("torch")
pytest.importorskip("onnxscript")


class Block(torch.nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(channels, channels, 3, padding=1)
        self.relu = torch.nn.ReLU()
        self.conv2 = torch.nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        return self.relu(self.conv2(self.relu(self.conv1(x))) + x)


class Net(torch.nn.Module):
    """A small ResNet-like network: stem, a Sequential of two residual blocks, a head."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.layer1 = torch.nn.Sequential(Block(8), Block(8))
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.fc(self.layer1(self.stem(x)).mean((2, 3)))


def _export(module, args, path, dynamo: bool):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), args, str(path), dynamo=dynamo)
    return path


def _scopes(path):
    tree = build_scope_tree(load_model(path))
    return tree, {".".join(s.path) for s in tree.scopes() if s.path}


@pytest.mark.parametrize("dynamo", [True, False], ids=["dynamo", "torchscript"])
def test_resnet_like_export_matches_its_modules(tmp_path, dynamo):
    net = Net()
    tree, scopes = _scopes(_export(net, (torch.randn(1, 3, 8, 8),), tmp_path / "net.onnx", dynamo))
    assert tree.source == ("torch-metadata" if dynamo else "names")
    modules = {name for name, _ in net.named_modules() if name}
    # torchscript names a module's second call `relu_1`: the same module, called again
    assert {re.sub(r"_\d+$", "", s) for s in scopes} <= modules
    if dynamo:
        assert scopes <= modules
    # every module holding a convolution or the linear layer is a scope with exactly its weights
    for name in ("stem", "layer1.0.conv1", "layer1.0.conv2", "layer1.1.conv1", "layer1.1.conv2", "fc"):
        assert name in scopes
        weights = sum(p.numel() for p in net.get_submodule(name).parameters())
        assert tree.get(tuple(name.split("."))).params == weights, name
    assert tree.get(("layer1",)).params == sum(p.numel() for p in net.layer1.parameters())
    assert sorted(tree.get(("layer1",)).children) == ["0", "1"]


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=64, max_position_embeddings=32)
    model = transformers.BertModel(config).eval()
    torch.manual_seed(0)
    with torch.no_grad():  # BERT starts with zero biases, which the exporter merges into one shared weight
        for parameter in model.parameters():
            parameter.normal_()
    path = _export(model, (torch.ones(1, 8, dtype=torch.long),), tmp_path_factory.mktemp("bert") / "bert.onnx", True)
    return model, path


def test_bert_export_matches_its_modules(bert):
    model, path = bert
    tree, scopes = _scopes(path)
    modules = dict(model.named_modules())
    assert scopes <= set(modules)
    for layer in ("0", "1"):
        for name in ("attention.self.query", "attention.self.key", "attention.self.value",
                     "attention.output.dense", "intermediate.dense", "output.dense"):
            full = f"encoder.layer.{layer}.{name}"
            assert full in scopes
            assert tree.get(tuple(full.split("."))).params == sum(p.numel() for p in modules[full].parameters())
    assert sorted(tree.get(("encoder", "layer")).children) == ["0", "1"]
