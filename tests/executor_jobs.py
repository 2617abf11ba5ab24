"""Jobs for the executor tests (importable by spawned worker processes)."""
from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from inspector_cli.executor.base import Job, Runner, WorkItem


@dataclass
class SquareJob(Job):
    """Squares numbers; kills its own process on `crash_on` for the first `crash_times` attempts."""

    marker_dir: str
    crash_on: Optional[str] = None
    crash_times: int = 0
    fail_on: Optional[str] = None
    delay: float = 0.0
    broken: bool = False
    hog_on: Optional[str] = None
    """Item that takes `hog_bytes` of memory for a second (for memory-limit tests)."""
    hog_bytes: int = 0

    def open(self) -> "SquareRunner":
        if self.broken:
            raise RuntimeError("cannot open the model")
        return SquareRunner(self)


class SquareRunner(Runner):
    def __init__(self, job: SquareJob) -> None:
        self.job = job

    def run_item(self, item: WorkItem) -> Any:
        time.sleep(self.job.delay)
        if item.key == self.job.crash_on:
            markers = Path(self.job.marker_dir)
            tried = len(list(markers.glob(f"{item.key}.*")))
            if tried < self.job.crash_times:
                (markers / f"{item.key}.{tried}").touch()
                os.kill(os.getpid(), signal.SIGKILL)
        if item.key == self.job.fail_on:
            raise ValueError(f"cannot read {item.key}")
        if item.key == self.job.hog_on:
            import numpy as np

            block = np.ones(self.job.hog_bytes, dtype=np.uint8)  # touched: resident
            deadline = time.monotonic() + 3.0
            while time.monotonic() < deadline:  # long enough for the executor to notice
                time.sleep(0.05)
            del block
        return {"pid": os.getpid(), "square": item.payload ** 2}


from inspector_cli.plugins import Plugin  # noqa: E402 - test helpers below


class NoMerge(Plugin):
    """A plugin without merge(): it may run in this process only."""

    name = "no-merge"

    def __init__(self) -> None:
        self.calls = 0

    def process_tensor(self, name, array, node) -> None:
        self.calls += 1

    def summary(self):
        return {"calls": {"n": self.calls}}
