"""What onnxruntime refuses when it loads a model file that mi's own loading reads anyway (issue 41).

mi's graph core names every node uniquely (reports, profiles and `--select` address nodes by name), so
two nodes sharing a name are renamed in memory; onnxruntime refuses the file as it is ("two nodes with
same node name"). A graph output that no node makes is read by mi as a dangling name, and a probe that
exposes only the tensors it reads never declares it; onnxruntime refuses the file ("Graph output ...
does not exist in the graph"). Analysing either copy told users that a model the deployed runtime will
not load was fine (`compare M M` PASS, `probe` and `nan-bisect` CLEAN).

Every command that runs a model checks it here first and stops in one line (exit 3). The renamed copy is
analysed only on request (`--rename-duplicate-nodes`: `RuntimeConfig.rename_duplicate_nodes`), and the
result then records which nodes were renamed (`ModelRef.renamed_nodes`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, List, Optional

from ..errors import ModelLoadError

if TYPE_CHECKING:
    from .graph import ModelGraph
    from .runner import RuntimeConfig

RENAME_FLAG = "--rename-duplicate-nodes"


@dataclass(frozen=True)
class Refusal:
    """One reason onnxruntime refuses the model file."""

    message: str
    """What is wrong, naming the nodes or tensors, and onnxruntime's own words."""
    renamable: bool
    """True when the renamed copy mi analyses with `--rename-duplicate-nodes` loads."""


def refusals(graph: "ModelGraph") -> List[Refusal]:
    """Every reason onnxruntime refuses `graph`'s file though mi's loading read it ([] for most models)."""
    found = [Refusal(f"{len(new) + 1} nodes are named '{name}' (onnxruntime: two nodes with same node name)", True)
             for name, new in graph.duplicate_node_names().items()]
    for name in graph.output_names:  # per output, no set of every tensor: open_session asks per session
        if name not in graph.producer and name not in graph.initializer_names and name not in graph.input_names:
            found.append(Refusal(f"graph output '{name}' is made by no node (onnxruntime: Graph output ({name}) "
                                 "does not exist in the graph)", False))
    return found


def require_loadable(graph: "ModelGraph", runtime: Optional["RuntimeConfig"] = None, *,
                     label: Optional[str] = None) -> None:
    """Raise `ModelLoadError` (exit 3, one line) when onnxruntime refuses `graph`'s file, unless every
    reason is a duplicate node name and `runtime.rename_duplicate_nodes` asks for the renamed copy."""
    found = refusals(graph)
    allowed = runtime is not None and runtime.rename_duplicate_nodes
    blocking = [r for r in found if not (allowed and r.renamable)]
    if not blocking:
        return
    shown = "; ".join(r.message for r in blocking[:3]) + (f"; {len(blocking) - 3} more" if len(blocking) > 3 else "")
    hint = (f"fix the model, or pass {RENAME_FLAG} to analyse a copy with the later ones renamed "
            "(the deployed runtime still refuses the file)") if all(r.renamable for r in blocking) \
        else "fix the model ('mi validate' lists every defect)"
    raise ModelLoadError(f"{label or graph.display_name}: onnxruntime refuses this model: {shown}", hint=hint)

