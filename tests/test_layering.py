"""House rules: imports point down, `mi --help` stays light, every command is documented."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "inspector_cli"

# package -> packages it must never import
FORBIDDEN = {
    "core": {"diff", "workflows", "commands", "render", "results", "cli", "config"},
    "diff": {"workflows", "commands", "render", "cli", "config"},
    "results": {"workflows", "commands", "render", "cli", "config"},
    "workflows": {"commands", "render", "cli"},
    "render": {"workflows", "commands", "cli", "core"},
    "config": {"workflows", "commands", "render"},
    "executor": {"core", "diff", "workflows", "commands", "render", "results", "cli", "config"},
}


def imported_packages(path: Path) -> set:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level >= 1 and node.module:
                rel = path.relative_to(PKG).parts
                base = list(rel[:-1])[: max(0, len(rel) - 1 - (node.level - 1))]
                parts = base + node.module.split(".")
                found.add(parts[0])
            elif node.module and node.module.startswith("inspector_cli."):
                found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("inspector_cli."):
                    found.add(alias.name.split(".")[1])
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_point_down(package):
    for path in (PKG / package).rglob("*.py"):
        bad = imported_packages(path) & FORBIDDEN[package]
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_only_render_touches_rich_and_only_commands_touch_click():
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG)
        text = path.read_text()
        if rel.parts[0] not in ("render", "commands"):
            assert "import rich" not in text and "from rich" not in text, f"{rel} imports rich"
        if rel.parts[0] not in ("commands", "config") and rel.name != "cli.py":
            assert "import click" not in text, f"{rel} imports click"


def test_help_does_not_import_onnxruntime():
    code = ("import sys; from inspector_cli.cli import cli; "
            "import click.testing as t; r = t.CliRunner().invoke(cli, ['--help']); assert r.exit_code == 0; "
            "r = t.CliRunner().invoke(cli, ['compare', '--help']); assert r.exit_code == 0, r.output; "
            "print(sorted(m for m in ('onnxruntime', 'onnx') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_command_has_help_and_a_readme_section():
    from click.testing import CliRunner

    from inspector_cli.cli import COMMANDS, cli

    readme = (ROOT / "README.md").read_text()
    for name in COMMANDS:
        result = CliRunner().invoke(cli, [name, "--help"])
        assert result.exit_code == 0 and "Usage: mi " + name in result.output
        assert f"### `mi {name}`" in readme, f"README has no section for mi {name}"


def test_modules_stay_small():
    for path in PKG.rglob("*.py"):
        lines = len(path.read_text().splitlines())
        assert lines <= 400, f"{path.relative_to(ROOT)} has {lines} lines; split it along a seam"
