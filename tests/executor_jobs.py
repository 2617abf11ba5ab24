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
        return {"pid": os.getpid(), "square": item.payload ** 2}
