"""Plugins for `mi probe`: your own statistic over the probed tensors, in the table and the JSON.

Write a subclass of `Plugin`, then load it with `--plugin module:Class` or register it in the
entry-point group `mi.plugins` (`--plugin NAME`)::

    # mypkg/plugins.py
    import numpy as np
    from inspector_cli.plugins import Plugin

    class PositiveShare(Plugin):
        name = "positive-share"
        description = "share of values > 0"

        def __init__(self):
            self.rows = {}

        def accepts(self, name, node):               # optional: which tensors to receive
            return node is not None and node.op_type == "Conv"

        def process_tensor(self, name, array, node):  # once per tensor and sample
            row = self.rows.setdefault(name, {"positive": 0, "values": 0})
            row["positive"] += int((array > 0).sum())
            row["values"] += array.size

        def summary(self):                            # {row label: {column: value}}
            return {t: {"share": r["positive"] / r["values"]} for t, r in self.rows.items()}

    # pyproject.toml
    [project.entry-points."mi.plugins"]
    positive-share = "mypkg.plugins:PositiveShare"

`process_tensor` receives each probed tensor (that `accepts` lets through) on every sample, as a
numpy array that must not be kept (copy what you need); `node` describes the producing node
(`NodeView`: name, op_type, domain, inputs, outputs, attributes) or is None for a graph input.
`summary()` returns a JSON-ready mapping of row label (usually the tensor name) to a mapping of
column name to value; `mi` shows it as one table per plugin and stores it under `plugins` in
the JSON result. A plugin is built with no arguments.

Optional, for `--workers`/`--executor ray`: `merge(other)` folds in another instance of the same
plugin that saw the samples after this one's (both built fresh, fed in sample order), e.g.
`row["positive"] += other_row["positive"]`. A plugin without `merge` runs in this process only.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

import numpy as np

from .errors import MiError, PluginError, UsageError

if TYPE_CHECKING:
    from .core.graph import ModelGraph

ENTRY_POINT_GROUP = "mi.plugins"
BUILTIN: Dict[str, str] = {
    "attention-entropy": "inspector_cli.probe.attention_entropy:AttentionEntropy",
}
"""Plugins shipped with mi, by name (also registered as entry points in pyproject.toml)."""


@dataclass(frozen=True)
class NodeView:
    """What a plugin learns about the node that produced a tensor."""

    name: str
    op_type: str
    domain: str = ""
    inputs: Tuple[str, ...] = ()
    outputs: Tuple[str, ...] = ()
    attributes: Dict[str, Any] = field(default_factory=dict)


class Plugin:
    """Base class of `mi probe` plugins (see the module documentation for a complete example)."""

    name: str = ""
    """Short name shown as the table title (defaults to the class name)."""
    description: str = ""

    def accepts(self, name: str, node: Optional[NodeView]) -> bool:
        """Whether to receive tensor `name` (default: every probed tensor)."""
        return True

    def process_tensor(self, name: str, array: np.ndarray, node: Optional[NodeView]) -> None:
        """Called once per accepted tensor and sample."""
        raise NotImplementedError

    def summary(self) -> Dict[str, Dict[str, Any]]:
        """{row label: {column: value}} after the last sample."""
        raise NotImplementedError

    def merge(self, other: "Plugin") -> None:
        """Optional: fold in `other`, which saw the samples after ours (enables worker runs)."""
        raise NotImplementedError


def mergeable(plugin: Plugin) -> bool:
    """Whether the plugin implements `merge` (and so can run over shards in workers)."""
    return type(plugin).merge is not Plugin.merge


def _entry_points() -> List[Any]:
    from importlib.metadata import entry_points

    return list(entry_points(group=ENTRY_POINT_GROUP))


def available_plugins() -> Dict[str, str]:
    """Plugin name -> 'module:Class', built-in ones first, then installed entry points."""
    found = dict(BUILTIN)
    for ep in _entry_points():
        found.setdefault(ep.name, ep.value)
    return found


def load_plugin(spec: str) -> Plugin:
    """Instantiate a plugin from 'module:Class' or an entry-point (or built-in) name."""
    spec = spec.strip()
    if ":" in spec:
        target = spec
    else:
        known = available_plugins()
        if spec not in known:
            names = ", ".join(sorted(known)) or "none"
            raise UsageError(f"--plugin {spec}: no such plugin (installed: {names})",
                             hint="use module:Class, or register it in the 'mi.plugins' entry-point group")
        target = known[spec]
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(f"--plugin {spec}: cannot import module '{module_name}' ({exc})") from exc
    cls = module
    for part in attr.split("."):
        cls = getattr(cls, part, None)
        if cls is None:
            raise UsageError(f"--plugin {spec}: module '{module_name}' has no '{attr}'")
    if not (isinstance(cls, type) and issubclass(cls, Plugin)):
        raise UsageError(f"--plugin {spec}: '{attr}' is not a subclass of inspector_cli.plugins.Plugin")
    try:
        plugin = cls()
    except Exception as exc:
        raise UsageError(f"--plugin {spec}: could not be created ({type(exc).__name__}: {exc})") from exc
    if not plugin.name:
        plugin.name = cls.__name__
    return plugin


def call_plugin(plugin: Plugin, method: str, *args: Any) -> Any:
    """Call a plugin method, turning its exceptions into one-line errors naming the plugin."""
    try:
        return getattr(plugin, method)(*args)
    except MiError:
        raise
    except Exception as exc:
        where = f" on tensor '{args[0]}'" if args and isinstance(args[0], str) else ""
        raise PluginError(f"plugin '{plugin.name}' failed in {method}{where}: {type(exc).__name__}: {exc}",
                          hint="fix the plugin or leave it out") from exc


def node_view(graph: "ModelGraph", tensor: str) -> Optional[NodeView]:
    """The producer of `tensor` as plugins see it (None for graph inputs)."""
    node = graph.producer.get(tensor)
    if node is None:
        return None
    import onnx

    attributes = {a.name: onnx.helper.get_attribute_value(a) for a in graph.node_proto(node.name).attribute
                  if a.type != onnx.AttributeProto.GRAPH}
    return NodeView(name=node.name, op_type=node.op_type, domain=node.domain, inputs=node.inputs,
                    outputs=node.outputs, attributes=attributes)
