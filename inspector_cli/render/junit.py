"""JUnit XML: one test suite per result, one test case per check (gate, finding, trigger...).

CI systems (GitHub, GitLab, Jenkins) show each gate as a test; a failure carries the measured
value and the threshold.
"""
from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from typing import Optional, Sequence

from ..results.base import Result
from .safe import visible


def _num(value: Optional[float]) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return f"{value:.6g}"


def junit_xml(results: Sequence[Result]) -> str:
    """The JUnit document of one or several results."""
    root = ET.Element("testsuites", name="mi")
    total = failures = 0
    for result in results:
        checks = result.checks()
        # XML 1.0 cannot hold control characters (ElementTree would write them raw): made visible.
        models = visible(", ".join(ref.path for ref in result.model_refs()))
        suite = ET.SubElement(root, "testsuite", name=f"mi {result.kind}" + (f" ({models})" if models else ""),
                              tests=str(len(checks)), failures=str(sum(not c.passed for c in checks)), errors="0",
                              skipped="0")
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", name="verdict", value=visible(result.summary()))
        for check in checks:
            case = ET.SubElement(suite, "testcase", classname=visible(check.group), name=visible(check.name))
            if not check.passed:
                detail = visible(check.message)
                if check.value is not None or check.threshold is not None:
                    detail += f" (measured {_num(check.value)}, threshold {_num(check.threshold)})"
                failure = ET.SubElement(case, "failure", message=detail[:500], type="gate")
                failure.text = detail
        if not checks:
            ET.SubElement(suite, "testcase", classname=f"{result.kind}", name="run completed")
        total += max(len(checks), 1)
        failures += sum(not c.passed for c in checks)
    root.set("tests", str(total))
    root.set("failures", str(failures))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
