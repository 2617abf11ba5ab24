"""The Ray cluster a run uses: found, joined through Ray Client, or started on this machine.

Addresses (`--address`):
- `auto`: the cluster running on this machine or named by RAY_ADDRESS (`ray start --head`);
- `ray://host:10001`: a remote cluster through Ray Client; `host:6379`: its GCS directly;
- `local`: a private instance for this run only, on the loopback interface (nothing else can
  reach it), with no dashboard, no usage statistics, logs in a temporary folder removed at the end;
- not given: RAY_ADDRESS when set, else a cluster running here, else a private local instance.

When Ray is already initialised in this process (a caller's own Ray driver, tests), that
connection is used as it is and left open.
"""
from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from typing import Any, Dict, Optional

from ..errors import InferenceError, UsageError

RAY_HINT = "pip install 'model-inspector[ray]'"
LOCAL = "local"
QUIET_ENV = {"RAY_USAGE_STATS_ENABLED": "0"}
"""Set (unless the user chose) before Ray starts: no usage statistics leave the machine."""
LOOPBACK_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
"""For a private local instance: only loopback addresses, so no token is needed to keep others out."""
LOCAL_OBJECT_STORE = 512 << 20
LOCAL_START_ATTEMPTS = 2  # starts of a private Ray instance before giving up (see _start_local)


def import_ray() -> Any:
    """The `ray` module, or a one-line usage error saying how to install it."""
    try:
        import ray
    except ImportError:
        raise UsageError("--executor ray needs Ray, which is not installed", hint=RAY_HINT) from None
    return ray


class RayConnection:
    """Connects on `connect()`, disconnects (and stops a private instance) on `close()`."""

    def __init__(self, address: Optional[str], *, cpus: Optional[int] = None) -> None:
        self.ray = import_ray()
        self.address = address
        self.cpus = cpus
        self.started_local = False
        self._owned = False
        self._tempdir: Optional[str] = None
        self.cluster: Dict[str, Any] = {}

    def connect(self) -> None:
        """Join or start the cluster (idempotent)."""
        if not self.ray.is_initialized():
            self._connect()
        if not self.cluster:
            resources = self.ray.cluster_resources()
            self.cluster = {"cpus": resources.get("CPU", 0),
                            "nodes": len([n for n in self.ray.nodes() if n.get("Alive")])}

    def _connect(self) -> None:
        ray = self.ray
        for key, value in QUIET_ENV.items():
            os.environ.setdefault(key, value)
        address = self.address or os.environ.get("RAY_ADDRESS")
        if address == LOCAL:
            self._start_local()
            return
        try:
            ray.init(address=address or "auto", log_to_driver=False, logging_level=logging.ERROR)
        except ConnectionError as exc:
            if address is not None:
                raise UsageError(f"--address {address}: no Ray cluster answers there ({_first_line(exc)})",
                                 hint="start one with 'ray start --head', or use --address local") from None
            self._start_local()  # nothing running and nothing asked for: a private instance
            return
        self._owned = True

    def _start_local(self) -> None:
        ray = self.ray
        for key, value in LOOPBACK_ENV.items():
            os.environ.setdefault(key, value)
        try:  # read by Ray when it resolves "127.0.0.1" (otherwise it picks the outward address)
            import ray._private.ray_constants as constants

            constants.ENABLE_RAY_CLUSTER = False
        except (ImportError, AttributeError):  # pragma: no cover - another Ray layout
            pass
        # a short path: Ray's Unix sockets live under it (107-byte limit)
        self._tempdir = tempfile.mkdtemp(prefix="mi-ray-", dir="/tmp" if os.path.isdir("/tmp") else None)
        for attempt in range(1, LOCAL_START_ATTEMPTS + 1):
            try:
                ray.init(num_cpus=self.cpus or os.cpu_count() or 1, include_dashboard=False,
                         _node_ip_address="127.0.0.1", _temp_dir=self._tempdir, object_store_memory=LOCAL_OBJECT_STORE,
                         log_to_driver=False, logging_level=logging.ERROR)
                break
            except Exception as exc:  # noqa: BLE001 - Ray raises a bare Exception for this
                # Ray waits a fixed 30 s for its raylet to register; on a loaded machine it may not, and a
                # second start (after the first's processes are gone) usually does.
                if "timed out during startup" not in str(exc):
                    raise
                ray.shutdown()
                if attempt == LOCAL_START_ATTEMPTS:
                    raise InferenceError(f"a local Ray instance did not start in time ({LOCAL_START_ATTEMPTS} "
                                         f"attempts): {_first_line(exc)}",
                                         hint="the machine may be overloaded; retry, or run with --executor "
                                              "local") from None
        self._owned = True
        self.started_local = True

    def describe(self) -> Dict[str, Any]:
        """What the run used, for the result's plan."""
        return {"address": self.address or "default", "started_local": self.started_local, **self.cluster}

    def close(self) -> None:
        try:
            if self._owned and self.ray.is_initialized():
                self.ray.shutdown()
        except Exception:  # noqa: BLE001 - e.g. its processes already died with a Ctrl-C: clean up anyway
            pass
        finally:
            self._owned = False
            self._remove_tempdir()

    def _remove_tempdir(self) -> None:
        if self._tempdir is None:
            return
        # Ray's processes may still write a last file while they exit after shutdown()
        for _ in range(50):
            shutil.rmtree(self._tempdir, ignore_errors=True)
            if not os.path.exists(self._tempdir):
                break
            time.sleep(0.1)
        self._tempdir = None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
