"""Global flags of the `mi` group, handed to commands through click's context object."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple


@dataclass
class AppState:
    quiet: bool = False
    verbose: int = 0
    no_color: bool = False
    debug: bool = False
    config_path: Optional[str] = None
    wide: bool = False
    """Tables: every column (the terminal shows the essential ones by default)."""
    columns: Tuple[str, ...] = ()
    """Tables: extra columns to show by name (e.g. shape, max rel)."""
    suite_step: bool = False
    """A step of `mi run`: the suite result keeps the command's whole result (never a table-only one)."""
