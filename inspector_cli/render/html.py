"""Self-contained HTML reports (inline CSS and SVG, no scripts, no network), rendered with jinja2.

jinja2 renders with autoescaping on, so node and tensor names from model files (which may hold
`<script>`) are always inert text; charts are built from escaped strings in render/svg.py.
"""
from __future__ import annotations

import datetime as _dt
import re
from typing import Any, Dict, List, Optional, Sequence

from ..results.base import Result
from ..version import __version__
from . import svg
from .safe import visible
from .table import FAIL, MUTED, OK, WARN
from .views import view_for

_ENV = None
STATUS_CLASS = {OK: "ok", FAIL: "fail", WARN: "warn", MUTED: "muted"}


def environment() -> Any:
    """The jinja2 environment (created once): package templates, autoescape on, strict undefined."""
    global _ENV
    if _ENV is None:
        import jinja2

        _ENV = jinja2.Environment(
            loader=jinja2.PackageLoader("inspector_cli.render", "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            finalize=_finalize,
        )
        _ENV.globals.update(svg=svg, status_class=STATUS_CLASS, fmt=_fmt)
        _ENV.filters["wbr"] = wbr
    return _ENV


def _finalize(value: Any) -> Any:
    """Every `{{ }}` output: plain strings (model names) get control characters made visible;
    Markup (charts, `|safe`) is ours and passes unchanged."""
    import markupsafe

    if isinstance(value, str) and not isinstance(value, markupsafe.Markup):
        return visible(value)
    return value


# "." only when not inside a number (0.90 stays whole); no "-" (negative numbers, dates).
_SEPARATOR = re.compile(r"(/|_|:|(?<!\d)\.|\.(?!\d))")


def wbr(text: Any) -> Any:
    """Escaped text with a line-break opportunity (<wbr>) after each separator (/ _ : .), so long
    tensor names wrap between their parts, never inside one."""
    from markupsafe import Markup, escape

    return Markup(_SEPARATOR.sub(lambda m: m.group(1) + "<wbr>", str(escape(text))))


def _fmt(value: Any, digits: int = 4, metric: str = "") -> str:
    from .table import fmt_value

    return fmt_value(value, metric) if isinstance(value, (int, float)) or value is None else str(value)


def section_template(kind: str) -> str:
    env = environment()
    name = f"sections/{kind}.html.j2"
    try:
        env.get_template(name)
        return name
    except Exception:  # jinja2.TemplateNotFound: the generic section shows the tables
        return "sections/generic.html.j2"


def render_html(results: Sequence[Result], *, title: Optional[str] = None,
                created: Optional[str] = None, map_metric: Optional[str] = None) -> str:
    """One HTML document with a section per result (a run, or several runs of `mi report`).

    Results with a scope map get the map section, coloured by `map_metric` (default: their first
    per-node metric).
    """
    from .map_section import map_for
    env = environment()
    sections: List[Dict[str, Any]] = []
    for index, result in enumerate(results):
        sections.append({"id": f"r{index}-{result.kind}", "kind": result.kind, "result": result,
                         "view": view_for(result), "template": section_template(result.kind),
                         "map": map_for(result, map_metric)})
    passed = all(r.passed for r in results)
    kinds = ", ".join(dict.fromkeys(r.kind for r in results))
    return env.get_template("report.html.j2").render(
        title=title or f"mi {kinds} report",
        sections=sections,
        passed=passed,
        tool_version=__version__,
        created=created or _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    )
