"""Numbers as table text (bytes, counts, microseconds), apart from any view: `mi inspect`'s tables use
them without importing the profile view and its result dataclasses (~25-50 ms of import)."""
from __future__ import annotations

from typing import Optional


def fmt_us(us: Optional[float]) -> str:
    """Microseconds as µs, ms or s."""
    if us is None:
        return "n/a"
    if us >= 1e6:
        return f"{us / 1e6:.3f} s"
    if us >= 1000:
        return f"{us / 1000:.3f} ms"
    return f"{us:.1f} µs"


def fmt_bytes(n: Optional[int], digits: int = 2) -> str:
    """Bytes in binary units, `digits` after the point ("n/a" for None)."""
    if n is None:
        return "n/a"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.{digits}f} {unit}"
    return f"{n} B"


def fmt_count(n: Optional[float]) -> str:
    """Counts with k/M/G/T suffixes."""
    if n is None:
        return "n/a"
    for unit, size in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.2f}{unit}"
    return f"{n:.0f}"


def fmt_num(x: Optional[float], digits: int = 2) -> str:
    """A float with fixed digits, n/a for None."""
    return "n/a" if x is None else f"{x:.{digits}f}"
