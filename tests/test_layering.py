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
    "core": {"diff", "workflows", "commands", "render", "results", "cli", "config", "validate"},
    "diff": {"workflows", "commands", "render", "cli", "config", "validate"},
    "results": {"workflows", "commands", "render", "cli", "config", "validate"},
    "workflows": {"commands", "render", "cli"},
    "profile": {"workflows", "commands", "render", "cli", "config"},
    "render": {"workflows", "commands", "cli", "core", "validate"},
    "config": {"workflows", "commands", "render"},
    "probe": {"workflows", "commands", "render", "cli", "config"},
    "validate": {"workflows", "commands", "render", "cli"},
    "executor": {"core", "diff", "workflows", "commands", "render", "results", "cli", "config"},
    "inspection": {"workflows", "commands", "render", "cli", "config"},
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
            "r = t.CliRunner().invoke(cli, ['nan-bisect', '--help']); assert r.exit_code == 0, r.output; "
            "print(sorted(m for m in ('onnxruntime', 'onnx', 'ray') if m in sys.modules))")
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


def test_finding_ids_do_not_collide_across_commands():
    """validate owns MI1xx-MI7xx; compare MI80x, probe MI82x, profile MI84x, nan-bisect MI90x."""
    import re

    from inspector_cli.validate.catalog import RULES

    ranges = {"compare": (800, 819), "probe": (820, 839), "profile": (840, 859), "nan_bisect": (900, 919)}
    homes = {"compare": ("compare", "golden", "layer"), "probe": ("probe",), "profile": ("profile",),
             "nan_bisect": ("nan_bisect",)}
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
