"""Starting a private Ray instance on a loaded machine: Ray waits a fixed 30 s for its raylet and then
raises; mi starts it once more, and after a second time-out gives one clear error (exit 3)."""
from __future__ import annotations

from typing import List

import pytest

pytest.importorskip("ray")

from inspector_cli.errors import InferenceError  # noqa: E402
from inspector_cli.executor.connection import RayConnection  # noqa: E402

TIMEOUT = Exception("The current node timed out during startup. This could happen because some of the raylet "
                    "failed to startup or the GCS has become overloaded.")


class FakeRay:
    """Ray's init/shutdown, failing the first `failures` starts with the time-out."""

    def __init__(self, failures: int, error: Exception = TIMEOUT) -> None:
        self.failures, self.error = failures, error
        self.calls: List[str] = []

    def init(self, **kwargs) -> None:
        self.calls.append("init")
        if self.failures:
            self.failures -= 1
            raise self.error

    def shutdown(self) -> None:
        self.calls.append("shutdown")


def connection(fake: FakeRay) -> RayConnection:
    conn = RayConnection("local")
    conn.ray = fake
    return conn


def test_a_start_that_times_out_once_is_retried():
    fake = FakeRay(failures=1)
    conn = connection(fake)
    conn._start_local()
    assert fake.calls == ["init", "shutdown", "init"]
    assert conn.started_local and conn._owned
    conn._remove_tempdir()


def test_two_time_outs_give_one_clear_error():
    fake = FakeRay(failures=2)
    conn = connection(fake)
    with pytest.raises(InferenceError) as caught:
        conn._start_local()
    assert fake.calls == ["init", "shutdown", "init", "shutdown"]
    assert str(caught.value) == ("a local Ray instance did not start in time (2 attempts): The current node timed "
                                 "out during startup. This could happen because some of the raylet failed to "
                                 "startup or the GCS has become overloaded. (the machine may be overloaded; "
                                 "retry, or run with --executor local)")
    conn._remove_tempdir()


def test_other_start_errors_are_not_retried():
    fake = FakeRay(failures=1, error=ValueError("object_store_memory too small"))
    with pytest.raises(ValueError, match="object_store_memory"):
        connection(fake)._start_local()
    assert fake.calls == ["init"]
