#!/usr/bin/env python3
"""Regenerate inspector_cli/schemas/<kind>.schema.json from the result dataclasses."""
from __future__ import annotations

import json
from pathlib import Path

from inspector_cli.results.schema import all_schemas

OUT = Path(__file__).resolve().parent.parent / "inspector_cli" / "schemas"


def render(schema: dict) -> str:
    return json.dumps(schema, indent=2, sort_keys=False) + "\n"


def main() -> None:
    OUT.mkdir(exist_ok=True)
    for kind, schema in all_schemas().items():
        path = OUT / f"{kind}.schema.json"
        path.write_text(render(schema))
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
