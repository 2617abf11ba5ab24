"""mkdocs hook: every docs/**/*.md page missing from mkdocs.yml's nav is added under "More".

Helpers document their features in new docs/<topic>.md files; this keeps those pages reachable
(and `mkdocs build --strict` quiet about omitted files) until someone gives them a place in the nav.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, List, Set


def _listed(nav: Any) -> Set[str]:
    found: Set[str] = set()
    if isinstance(nav, str):
        found.add(nav)
    elif isinstance(nav, list):
        for item in nav:
            found |= _listed(item)
    elif isinstance(nav, dict):
        for value in nav.values():
            found |= _listed(value)
    return found


def on_config(config: Any, **_: Any) -> Any:
    """Append the unlisted pages, sorted by path, as a "More" section."""
    nav: List[Any] = config["nav"] or []
    docs = Path(config["docs_dir"])
    listed = _listed(nav)
    missing = sorted(p.relative_to(docs).as_posix() for p in docs.rglob("*.md")
                     if p.relative_to(docs).as_posix() not in listed)
    if missing:
        nav.append({"More": missing})
        config["nav"] = nav
    return config
