"""Model-supplied text made safe to show: control characters visible, Markdown escaped.

Names of nodes and tensors come from the model file, which may be hostile: `\\x1b[2J` clears a
terminal, `\\x1b]0;...\\x07` retitles the window, `\\x1b[1A` moves the cursor up over a FAIL verdict
in a CI log, a newline splits a one-line verdict that CI greps, and U+202E reverses the text after
it. `visible` turns every such character into a printable escape (`\\x1b`, `\\n`, `\\u202e`), so
what a model says is shown, never obeyed. It imports nothing heavy: `cli.py` uses it for `Error:`
lines before any command loads.
"""
from __future__ import annotations

import re
import unicodedata
from typing import Any

# C0 controls, DEL, C1 controls (0x80-0x9f, including the 8-bit CSI 0x9b), and the Unicode format
# characters that reorder or hide text (bidi overrides and isolates, zero-width joiners, BOM).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: "re.Match[str]") -> str:
    char = match.group(0)
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: Any) -> str:
    """`text` as a string with every control or text-reordering character written as an escape.

    Idempotent (the escapes are printable), so applying it at several layers is harmless.
    """
    value = text if isinstance(text, str) else str(text)
    if value.isascii() and value.isprintable():  # the usual name, decided in C (every cell of a table passes here)
        return value
    return _UNSAFE.sub(_escape, value) if _UNSAFE.search(value) else value


def is_unsafe_char(char: str) -> bool:
    """True for one character `visible` would escape (used by tests and the fuzzers)."""
    return bool(_UNSAFE.fullmatch(char)) or unicodedata.category(char) == "Cc"


# Markdown: HTML would be rendered by a pull-request page (`<img onerror=...>`), `|` ends a table
# cell, and a backslash escapes the next character. Every tag starts with `<`, so `&lt;` alone makes
# HTML inert; `>` stays as is ("cosine >= 0.98" reads as written in the raw text too).
_MARKDOWN = {"<": "&lt;", "|": "\\|", "\\": "\\\\", "`": "\\`"}
_MARKDOWN_RE = re.compile(r"[<|\\`]")


def markdown_text(text: Any) -> str:
    """`text` visible (see `visible`) and escaped for a GitHub-flavoured Markdown table cell or line."""
    return _MARKDOWN_RE.sub(lambda m: _MARKDOWN[m.group(0)], visible(text))
