"""Every command has a guide page in the site's nav that links to its generated option reference."""
from __future__ import annotations

from pathlib import Path

import click
import pytest
import yaml

from inspector_cli.cli import cli

ROOT = Path(__file__).resolve().parent.parent
GUIDE_FILE = {"inputs": "inputs-command.md"}  # docs/inputs.md is the topic page on input formats


def _commands() -> list[str]:
    return cli.list_commands(click.Context(cli))


def _nav_files(node: object) -> set[str]:
    if isinstance(node, str):
        return {node}
    if isinstance(node, dict):
        return set().union(*(_nav_files(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(_nav_files(v) for v in node)) if node else set()
    return set()


@pytest.mark.parametrize("command", _commands())
def test_guide_and_reference_exist_are_linked_and_in_the_nav(command):
    guide = ROOT / "docs" / "guide" / GUIDE_FILE.get(command, f"{command}.md")
    reference = ROOT / "docs" / "commands" / f"{command}.md"
    assert guide.exists(), f"no guide page for mi {command}: {guide.relative_to(ROOT)}"
    assert reference.exists(), "run python scripts/gen_docs.py"
    assert f"../commands/{command}.md" in guide.read_text(), f"{guide.name} does not link to its reference"
    # mkdocs.yml holds a !!python/name tag for the emoji extension: read only the nav
    text = (ROOT / "mkdocs.yml").read_text()
    nav = yaml.safe_load(text[text.index("\nnav:"):].split("\n\n")[0]) if "\nnav:" in text else {}
    files = _nav_files(nav.get("nav", []))
    assert f"guide/{guide.name}" in files and f"commands/{command}.md" in files, f"mi {command} missing from the nav"
