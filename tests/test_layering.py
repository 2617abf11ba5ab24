"""House rules: imports point down, `mi --help` stays light, every command is documented."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "inspector_cli"

ENGINES = {"compare", "nanbisect", "probe", "profile", "validate", "sequence", "remedy", "inspection"}
"""One package per command's engine (nan-bisect's is `nanbisect`: a package `nan_bisect` would shadow the
exported function `inspector_cli.nan_bisect` once imported); `workflows/` holds one orchestrator per command."""
UPPER = {"workflows", "commands", "render", "cli"}

# package -> packages it must never import (no exceptions)
FORBIDDEN = {
    "core": {"diff", "results", "config", "batching", "plugins", "serialize", *UPPER, *ENGINES},
    "diff": {"config", *UPPER, *ENGINES},
    "results": {"config", *UPPER, *ENGINES},
    "executor": {"core", "diff", "results", "config", *UPPER, *ENGINES},
    "config": {*UPPER, *ENGINES},
    "render": {"workflows", "commands", "cli", "core", *ENGINES},
    "workflows": {"commands", "render", "cli"},
    # an engine imports core, diff, results, executor and its own modules, never another engine
    **{engine: {"config", *UPPER, *(ENGINES - {engine})} for engine in ENGINES},
    # remedy is computed from a comparison: it builds on compare's pairing, and nothing builds on remedy
    "remedy": {"config", *UPPER, *(ENGINES - {"remedy", "compare"})},
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, modules: set) -> set:
    """Every inspector_cli module `path` imports, at any depth (inside functions too)."""
    own = module_name(path)
    found = set()
    tree = ast.parse(path.read_text())
    # `if TYPE_CHECKING:` imports never run: they are annotations, not dependencies
    typing_only = {id(inner) for node in ast.walk(tree)
                   if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", "")) == "TYPE_CHECKING"
                   for stmt in node.body for inner in ast.walk(stmt)}
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        targets = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = own.split(".") if path.name == "__init__.py" else own.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            # `from package import module` imports the module; `from module import name` the module
            targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != own:
                found.add(target)
    return found


def import_graph() -> dict:
    modules = {module_name(p): p for p in PKG.rglob("*.py")}
    return {name: imported_modules(path, set(modules)) for name, path in modules.items()}


def imported_packages(path: Path) -> set:
    modules = {module_name(p) for p in PKG.rglob("*.py")}
    return {m.split(".")[1] for m in imported_modules(path, modules) if m.count(".") >= 1}


def find_cycle(graph: dict) -> list:
    """One import cycle as [m1, m2, ..., m1], or [] when the graph has none (depth-first search)."""
    state: dict = {}
    stack: list = []

    def visit(node: str) -> list:
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return []

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return []


def test_no_import_cycles_anywhere():
    """Imports inside functions count: a cycle dodged by a late import is still a cycle."""
    cycle = find_cycle(import_graph())
    assert not cycle, "import cycle: " + " -> ".join(cycle)


def test_cycle_finder_finds_a_cycle_and_names_it():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_import_graph_sees_imports_inside_functions(tmp_path):
    graph = import_graph()
    assert "inspector_cli.workflows.compare" in graph["inspector_cli.commands.compare"]  # a lazy import
    assert "inspector_cli.compare.plan" in graph["inspector_cli.compare.batch"]


def test_every_engine_package_is_checked():
    packages = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert ENGINES <= packages
    assert packages - {"commands", "cli", "testing"} <= set(FORBIDDEN) | {"render"}


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_point_down(package):
    for path in (PKG / package).rglob("*.py"):
        bad = imported_packages(path) & FORBIDDEN[package]
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_workflows_hold_one_orchestrator_per_command():
    """No engine code in workflows/: flat modules only, each named after a command."""
    from inspector_cli.cli import COMMANDS

    commands = {c.replace("-", "_") for c in COMMANDS} | {"report_diff", "sequence"}  # sequence: the mode shared by compare, nan-bisect and probe
    assert not [p for p in (PKG / "workflows").iterdir() if p.is_dir() and any(p.glob("*.py"))]  # stale __pycache__ folders of moved packages do not count
    modules = {p.stem for p in (PKG / "workflows").glob("*.py")} - {"__init__"}
    assert modules <= commands, sorted(modules - commands)


def test_config_package_keeps_only_the_yaml_machinery():
    """Each command's config lives beside its engine (compare/config.py, ...)."""
    for engine in ENGINES:
        assert (PKG / engine / "config.py").exists(), f"{engine}/config.py is missing"
        assert not (PKG / "config" / f"{engine}.py").exists(), f"config/{engine}.py belongs in {engine}/"


def test_only_render_touches_rich_and_only_commands_touch_click():
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG)
        text = path.read_text()
        if rel.parts[0] not in ("render", "commands"):
            assert "import rich" not in text and "from rich" not in text, f"{rel} imports rich"
        if rel.parts[0] not in ("commands", "config") and rel.name != "cli.py":
            assert "import click" not in text, f"{rel} imports click"


HELP_ARGS = (["--help"], ["compare", "--help"], ["nan-bisect", "--help"], ["run", "--help"], ["profile", "--help"],
             ["inputs", "make", "--help"], ["inputs", "show", "--help"], ["config", "check", "--help"],
             ["config", "schema", "--help"])


def test_help_does_not_import_onnxruntime():
    """`mi --help` (and a command's --help) stays fast: none of the heavy modules is imported, and no
    plugin provider is looked for (onnxruntime, its plugin packages and mi's discovery stay out)."""
    code = ("import sys; import click.testing as t; from inspector_cli.cli import cli\n"
            f"for args in {HELP_ARGS!r}:\n"
            "    r = t.CliRunner().invoke(cli, list(args)); assert r.exit_code == 0, (args, r.output)\n"
            "print(sorted(m for m in sys.modules if m in ('onnx', 'ray', 'PIL', 'inspector_cli.core.plugin_eps',\n"
            "             'inspector_cli.core.providers') or m.startswith('onnxruntime')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_command_has_help_a_reference_page_and_a_guide():
    from click.testing import CliRunner

    from inspector_cli.cli import COMMANDS, cli

    guides = {"inputs": "inputs-command"}  # docs/inputs.md is the page about input formats
    for name in COMMANDS:
        result = CliRunner().invoke(cli, [name, "--help"])
        assert result.exit_code == 0 and "Usage: mi " + name in result.output
        assert (ROOT / "docs" / "commands" / f"{name}.md").exists(), f"no reference page for mi {name}"
        guide = ROOT / "docs" / "guide" / f"{guides.get(name, name)}.md"
        assert guide.exists() and f"# `mi {name}`" in guide.read_text(), f"no guide for mi {name}"


def test_modules_stay_small():
    for path in PKG.rglob("*.py"):
        lines = len(path.read_text().splitlines())
        assert lines <= 400, f"{path.relative_to(ROOT)} has {lines} lines; split it along a seam"


def test_finding_ids_do_not_collide_across_commands():
    """validate owns MI1xx-MI7xx; compare MI80x, probe MI82x, profile MI84x, remedy MI86x, nan-bisect MI90x."""
    import re

    from inspector_cli.validate.catalog import RULES

    ranges = {"compare": (800, 819), "probe": (820, 839), "profile": (840, 859), "remedy": (860, 879),
              "nan_bisect": (900, 919)}
    homes = {"compare": ("compare", "golden", "layer"), "probe": ("probe",), "profile": ("profile",),
             "remedy": ("remedy",), "nan_bisect": ("nan_bisect", "nanbisect")}
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG).as_posix()
        if rel.startswith("validate/") or "validate" in rel or rel.startswith("render/sarif"):
            continue
        for number in map(int, re.findall(r'"MI(\d{3})"', path.read_text())):
            assert f"MI{number}" not in RULES, f"{rel} uses validate's rule id MI{number}"
            owner = [k for k, (lo, hi) in ranges.items() if lo <= number <= hi]
            assert owner, f"{rel}: MI{number} is outside every command's range"
            assert any(h in rel for h in homes[owner[0]]) or rel.startswith(("render/", "results/")), \
                f"{rel} uses {owner[0]}'s id MI{number}"


def test_no_import_cycles_between_packages():
    """Packages (and top-level modules) of inspector_cli import each other one way only: a cycle
    between `results` and `serialize`, say, is a cycle even when no two modules form one."""
    packages: dict = {}
    for module, targets in import_graph().items():
        source = module.split(".")[1] if module.count(".") >= 1 else module
        for target in targets:
            dest = target.split(".")[1] if target.count(".") >= 1 else target
            if source != dest and "inspector_cli" not in (source, dest):
                packages.setdefault(source, set()).add(dest)
    cycle = find_cycle(packages)
    assert not cycle, "package import cycle: " + " -> ".join(cycle)
