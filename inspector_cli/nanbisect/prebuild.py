"""The first replay's session, built on the idle core before any sample turns out bad (issue 16).

A bad sample's origin costs one new session (the replay of a span with every tensor exposed): 3-4
plain inferences of these small models to build, more than the whole budget of the search. When
the data set is large enough that one speculative build is a small share of the clean scan
(`PREBUILD_SHARE`), the session the first bad sample will most likely need is built in a
background thread while the scan runs (onnxruntime releases the GIL while it builds).

"Most likely": the walk's first replay depends only on which outputs and checkpoint tensors are
bad. The prediction assumes every float output and checkpoint tensor is (a NaN/Inf entering early
spreads everywhere: a bad input, an overflow in the first layers), runs the walk's own decisions
with stand-in values and stops at its first replay. A sample that needs another span builds it as
before; the prebuilt session is the very session the walk would have built (same region, same
exposed tensors, same bytes and options), so every record stays identical.
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from typing import TYPE_CHECKING, Callable, Dict, Mapping, Optional, Tuple

import numpy as np

from ..core import background
from ..core.runner import Session
from .regions import FLOAT_TYPES, Region

if TYPE_CHECKING:  # pragma: no cover
    from .locate import Locator

PREBUILD_SHARE = 0.05
"""Build speculatively when one session build is at most this share of the expected clean scan
(the 5% a clean sample may cost over plain inference)."""

Key = Tuple[object, ...]


class Planned(Exception):
    """Raised by the dry walk at its first replay: the region and what it would expose."""

    def __init__(self, key: Key, region: Region, exposed: Tuple[str, ...]) -> None:
        super().__init__("first replay")
        self.key, self.region, self.exposed = key, region, exposed


def stand_in_values(locator: "Locator", names: Tuple[str, ...]) -> Dict[str, np.ndarray]:
    """One-element values for `names`: NaN for float tensors (or unknown types), 0 for the others
    (integer tensors are never bad, so the walk must see them clean)."""
    graph = locator.prepared.graph
    values: Dict[str, np.ndarray] = {}
    for name in names:
        try:
            elem = graph.tensor_info(name).elem_type
        except Exception:  # noqa: BLE001 - a tensor without a known type: assume float
            elem = 0
        values[name] = np.full(1, np.nan, np.float32) if elem in FLOAT_TYPES or elem == 0 \
            else np.zeros(1, np.int64)
    return values


class Prebuilder:
    """At most one speculative session, built on a background thread (`core.background`: joined
    before the process exits, since it runs inside onnxruntime); sessions are built one at a time
    (one proto is never read by two builds at once)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.key: Optional[Key] = None
        self.future: Optional["Future[Session]"] = None
        self.used = False

    def start(self, key: Key, factory: Callable[[], Session]) -> None:
        future: "Future[Session]" = Future()

        def build() -> None:
            try:
                with self.lock:
                    future.set_result(factory())
            except BaseException as exc:  # noqa: BLE001 - re-raised where the session is taken
                future.set_exception(exc)

        self.key, self.future = key, future
        background.start(build, name="mi-nan-prebuild")

    def take(self, key: Key, factory: Callable[[], Session]) -> Session:
        """The prebuilt session when `key` is the predicted one (waiting for it), else a new one."""
        if self.future is not None and key == self.key and not self.used:
            self.used = True
            try:
                return self.future.result()
            except Exception:  # noqa: BLE001 - the build failed in the background: build here, raising here
                pass
        with self.lock:
            return factory()

    def close(self) -> None:
        """Wait for a build still running (its session may read weights from a temporary folder)."""
        if self.future is not None:
            try:
                self.future.result()
            except Exception:  # noqa: BLE001 - never used: nothing to report
                pass
            self.future = None


def worth_it(expected_samples: int, build_seconds: float, run_seconds: float) -> bool:
    """Does one speculative build cost at most `PREBUILD_SHARE` of scanning the data set?

    CPU seconds both: a session build (this thread: onnxruntime builds on the caller's) and a warm
    scan run (the process: its intra-op threads work too). Wall times moved the answer from run to
    run on a loaded machine (MobileNetV2 at 100 samples: yes, then no)."""
    return expected_samples >= 2 and build_seconds <= PREBUILD_SHARE * expected_samples * run_seconds


def timed(action: Callable[[], Session]) -> Tuple[Session, float]:
    """The session `action` builds, and the CPU seconds this thread spent building it."""
    start = time.thread_time()
    session = action()
    return session, time.thread_time() - start


def predict(locator: "Locator", feeds: Mapping[str, np.ndarray]) -> Optional[Planned]:
    """The first replay of a sample whose float outputs and checkpoint tensors are all bad, or None
    (the root plan exposes everything, or the walk would need no replay)."""
    plan = locator.root_plan(feeds)
    if plan.plan is None:
        return None
    values = stand_in_values(locator, tuple(dict.fromkeys([*locator.topo.outputs, *plan.exposed])))
    from .values import Predicate, is_bad

    if not any(is_bad(values[o]) for o in locator.topo.outputs):
        return None
    locator.dry = True
    try:
        locator._explain_run(locator.root, plan.plan, values, {}, feeds, Predicate.NONFINITE, locator.budget)
    except Planned as planned:
        return planned
    finally:
        locator.dry = False
    return None
