"""The documentation cannot drift: generated command pages match the commands, the site builds strictly."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import gen_docs  # noqa: E402  (scripts/ is not a package)


def test_generated_command_pages_match_the_commands():
    pages = gen_docs.pages()
    on_disk = {p.name for p in (ROOT / "docs" / "commands").glob("*.md")}
    assert on_disk == set(pages), "run python scripts/gen_docs.py"
    for name, text in pages.items():
        assert (ROOT / "docs" / "commands" / name).read_text() == text, (
            f"docs/commands/{name} is out of date: run python scripts/gen_docs.py")


def test_a_command_page_lists_every_option_of_the_command():
    from click.testing import CliRunner

    from inspector_cli.cli import cli

    page = (ROOT / "docs" / "commands" / "profile.md").read_text()
    help_text = CliRunner().invoke(cli, ["profile", "--help"]).output
    for option in ("--against", "--runs", "--max-latency", "--min-speedup", "--shape"):
        assert option in help_text and f"`{option} " in page


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None,
                    reason="mkdocs and mkdocs-material come with the dev extra")
def test_the_site_builds_strictly(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                            cwd=ROOT, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "site" / "cookbook" / "int8-layer" / "index.html").exists()
    assert (tmp_path / "site" / "commands" / "compare" / "index.html").exists()


def test_pages_missing_from_the_nav_are_added_under_more():
    from mkdocs_hooks import on_config

    config = on_config({"nav": [{"Home": "index.md"}], "docs_dir": str(ROOT / "docs")})
    more = config["nav"][-1]["More"]
    assert "index.md" not in more and "cookbook/int8-layer.md" in more and "commands/compare.md" in more
