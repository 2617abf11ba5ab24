"""Regenerate the matrix table of docs/hostile-input.md from tests/hostile/test_matrix.py's CASES.

    .venv/bin/python scripts/gen_hostile_matrix.py
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.hostile.test_matrix import CASES  # noqa: E402

DOC = ROOT / "docs" / "hostile-input.md"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\x1b", "\\x1b")


def table() -> str:
    rows = ["| case | command | exit | message |", "|---|---|---|---|"]
    for case in CASES:
        argv = " ".join(re.sub(r"\{(\w+)\}", r"\1", arg) for arg in case.argv)
        message = case.message or ("(stderr empty)" if case.code in (0, 1) else "")
        rows.append(f"| {case.id} | `{_cell('mi ' + argv)}` | {case.code} | {_cell(message)} |")
    return "\n".join(rows) + "\n"


def main() -> None:
    text = DOC.read_text()
    start = text.index("| case | command | exit | message |")
    end = text.find("\n\n", start)
    end = len(text) if end < 0 else end + 1
    text = text[:start] + table() + text[end:]
    text = re.sub(r"`tests/hostile/test_matrix.py`, \d+ cases", f"`tests/hostile/test_matrix.py`, {len(CASES)} cases",
                  text)
    DOC.write_text(text)
    print(f"{DOC.relative_to(ROOT)}: {len(CASES)} cases")


if __name__ == "__main__":
    main()
