"""render/safe.py: what a model-supplied string becomes on a terminal and in Markdown."""
from __future__ import annotations

import pytest

from inspector_cli.render.safe import markdown_text, visible
from inspector_cli.render.table import Cell, Table, View
from inspector_cli.render.text import view_to_csv, view_to_markdown, view_to_plain


@pytest.mark.parametrize("raw, shown", [
    ("\x1b]0;title\x07", "\\x1b]0;title\\x07"),
    ("\x1b[2J\x1b[1A", "\\x1b[2J\\x1b[1A"),
    ("a\nb\tc\rd", "a\\nb\\tc\\rd"),
    ("\x00\x7f\x9b", "\\x00\\x7f\\x9b"),            # NUL, DEL, the 8-bit CSI
    ("abc\u202edcba", "abc\\u202edcba"),             # right-to-left override
    ("zero\u200bwidth", "zero\\u200bwidth"),
    ("/encoder/layer.0/conv_1:0 µs ü 中", "/encoder/layer.0/conv_1:0 µs ü 中"),  # ordinary text untouched
])
def test_visible(raw: str, shown: str) -> None:
    assert visible(raw) == shown
    assert visible(visible(raw)) == shown  # idempotent: safe to apply at several layers


def test_markdown_text_escapes_html_pipes_and_backslashes() -> None:
    assert markdown_text("<img src=x onerror=alert(1)>|a\nb\\c`d`&") == \
        "&lt;img src=x onerror=alert(1)>\\|a\\\\nb\\\\c\\`d\\`&"
    assert markdown_text("cosine >= 0.98") == "cosine >= 0.98"


def test_cells_titles_notes_and_verdicts_are_safe_in_every_plain_format() -> None:
    view = View(verdict="FAIL: a\nFOUND: forged", passed=False)
    table = Table(title="t\x1b[2J", columns=["name", "value"])
    table.add("n\x1b]0;x\x07", "1")
    table.rows.append([Cell("a|b\nc"), Cell("2")])
    view.tables.append(table)
    view.notes.append("error: node '\x1b[1A' failed")
    for text in (view_to_plain(view), view_to_csv(view), view_to_markdown(view)):
        assert "\x1b" not in text and "\x07" not in text
    plain = view_to_plain(view).splitlines()
    assert plain[-1] == "FAIL: a\\nFOUND: forged" and not any(line.startswith("FOUND") for line in plain)
    markdown = view_to_markdown(view)
    assert "| a\\|b\\\\nc" in markdown and "**FAIL: a\\\\nFOUND: forged**" in markdown
    assert "- error: node '\\\\x1b[1A' failed" in markdown


def test_rich_console_output_has_no_raw_escape(tmp_path) -> None:
    import io

    from inspector_cli.render.console import make_console, print_view

    view = View(verdict="PASS \x1b[2J", passed=True)
    table = Table(title="[bold]t[/x]\x1b[2J", columns=["n\x1b"], caption="c\x07")  # rich markup is not parsed
    table.add("\x1b]0;title\x07")
    view.tables.append(table)
    buffer = io.StringIO()
    print_view(view, make_console(buffer, no_color=True))
    text = buffer.getvalue()
    assert "\x1b" not in text and "\x07" not in text
    assert "[bold]t[/x]\\x1b[2J" in text and "\\x1b]0;title\\x07" in text
