"""Which view builder renders which result kind (tables shared by the terminal, markdown and HTML)."""
from __future__ import annotations

import importlib
from typing import Any, Callable, Dict

from .table import Table, View

# result kind -> "module:function" returning a View. Add a line when a kind lands.
VIEW_BUILDERS: Dict[str, str] = {
    "compare": "inspector_cli.render.compare_view:compare_view",
    "report-diff": "inspector_cli.render.report_diff_view:report_diff_view",
    "suite": "inspector_cli.render.suite_view:suite_view",
    "profile": "inspector_cli.render.profile_view:profile_view",
    "probe": "inspector_cli.render.probe_view:probe_view",
    "validate": "inspector_cli.render.validate_view:validate_view",
    "nan-bisect": "inspector_cli.render.nan_bisect_view:nan_bisect_view",
    "probe-list": "inspector_cli.render.probe_view:tensor_list_view",
    "probe-history": "inspector_cli.render.probe_view:history_list_view",
    "inputs": "inspector_cli.render.inputs_view:inputs_view",
    "sequence": "inspector_cli.render.sequence_view:sequence_view",
    "inspect": "inspector_cli.render.inspect_view:inspect_view",
    "fix": "inspector_cli.render.fix_view:fix_view",
}


def view_builder(kind: str) -> Callable[[Any], View]:
    target = VIEW_BUILDERS.get(kind)
    if target is None:
        return generic_view
    module, _, attr = target.partition(":")
    from .rollup_view import with_rollup  # the --group-by scope table of a grouped result

    return with_rollup(getattr(importlib.import_module(module), attr))


def view_for(result: Any) -> View:
    return view_builder(result.kind)(result)


def generic_view(result: Any) -> View:
    """Fallback for kinds without a builder: the checks as one table."""
    view = View(passed=result.passed, verdict=result.summary())
    table = Table(title=f"{result.kind} checks", columns=["check", "result", "message"])
    for check in result.checks():
        table.add(check.name, "pass" if check.passed else "FAIL", check.message)
    view.tables.append(table)
    return view
