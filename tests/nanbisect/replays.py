"""Watching which regions the nan-bisect locator opens sessions for (shared by the walk-back tests)."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator, List

from inspector_cli.nanbisect.model import PreparedModel


def first_last(region: Any, exposed: Any) -> tuple:
    return (region.positions[0], region.positions[-1])


@contextmanager
def replays(prepared: PreparedModel, describe: Callable[[Any, Any], Any] = first_last) -> Iterator[List[Any]]:
    """The regions whose sessions are opened while the block runs (any thread), each as
    `describe(region, exposed)`, in order; by default its (first, last) positions."""
    seen: List[Any] = []
    opened = prepared.open_region

    def spy(region, exposed):  # type: ignore[no-untyped-def]
        seen.append(describe(region, exposed))
        return opened(region, exposed)

    prepared.open_region = spy  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        del prepared.open_region
