"""The progress callback every engine and workflow accepts (a leaf module: engines import it)."""
from __future__ import annotations

from typing import Callable, Optional

Progress = Callable[[int, Optional[int], str], None]
"""progress(done, total or None, label): called after each unit of work."""


def no_progress(done: int, total: Optional[int], label: str) -> None:
    """The default progress callback: does nothing."""
