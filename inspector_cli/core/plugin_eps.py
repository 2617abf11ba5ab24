"""onnxruntime's plugin execution providers: packages installed beside the stock onnxruntime wheel.

Since onnxruntime's EP ABI, a provider may ship as a package of its own (`onnxruntime-ep-openvino`,
`onnxruntime-qnn`, `onnxruntime-ep-webgpu`, ...) whose module advertises its shared library with
`get_library_path()` and the providers it holds with `get_ep_names()` (or `get_ep_name()`); an
application registers the library (`onnxruntime.register_execution_provider_library`) and then picks
among the devices the provider offers (`onnxruntime.get_ep_devices()`).

Finding them costs no import: `installed_plugins` lists the top-level `onnxruntime_*` packages on
sys.path whose `__init__.py` defines `get_library_path`, and reads their distribution's name and
version from its `.dist-info` folder. A module is imported (for its library and names) only when a
provider it may hold is asked for, and a library is registered once per process (a forked worker
that inherited the registration finds it registered). A library given on disk (`--ep-library
NAME=PATH`) is registered the same way under NAME.
"""
from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
import threading
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Tuple

from ..errors import InferenceError, UsageError

PREFIX = "onnxruntime_"
"""Top-level modules of plugin packages start with this (onnxruntime_ep_openvino, onnxruntime_qnn)."""
ADVERTISES = "get_library_path"
"""What a plugin module defines (onnxruntime's packaging guidance): the path to register."""


@dataclass(frozen=True)
class PluginPackage:
    """One installed plugin package, as found on disk (nothing imported)."""

    module: str
    """Its top-level module, e.g. `onnxruntime_ep_openvino`."""
    folder: str
    distribution: Optional[str] = None
    """The distribution's name from its metadata (`onnxruntime-ep-openvino`), when found."""
    version: Optional[str] = None

    def describe(self) -> str:
        name = self.distribution or self.module
        return f"{name} {self.version}" if self.version else name


@dataclass(frozen=True)
class PluginLibrary:
    """A plugin library ready to register: from a package (imported) or from `--ep-library`."""

    registration: str
    """The name it is registered under in onnxruntime."""
    path: str
    ep_names: Tuple[str, ...] = ()
    """Providers the package says it holds (empty for a library given on disk: read from its devices)."""
    package: Optional[PluginPackage] = None
    facts: Dict[str, str] = field(default_factory=dict)


def _dist_infos(folder: str, names: List[str]) -> Dict[str, Tuple[str, Optional[str]]]:
    """module -> (distribution name, version) from the `*.dist-info` folders of one sys.path entry:
    the module named by `top_level.txt`, else by the folder's own name (wheels write both)."""
    found: Dict[str, Tuple[str, Optional[str]]] = {}
    for entry in names:
        if not (entry.lower().startswith(PREFIX) and entry.endswith(".dist-info")):
            continue
        path = os.path.join(folder, entry)
        meta = _metadata(os.path.join(path, "METADATA"))
        stem, _, version = entry[: -len(".dist-info")].partition("-")
        distribution = meta.get("Name") or stem
        version = meta.get("Version") or version or None
        modules = [stem.lower()]
        try:
            with open(os.path.join(path, "top_level.txt"), encoding="utf-8") as handle:
                modules = [line.strip() for line in handle if line.strip()] or modules
        except OSError:
            pass
        for module in modules:
            found.setdefault(module, (distribution, version))
    return found


def _metadata(path: str) -> Dict[str, str]:
    """The `Name:` and `Version:` headers of a METADATA file (the header block only)."""
    out: Dict[str, str] = {}
    try:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if not line.strip():
                    break
                key, sep, value = line.partition(":")
                if sep and key in ("Name", "Version"):
                    out[key] = value.strip()
    except OSError:
        pass
    return out


def _advertises_library(init_file: str) -> bool:
    try:
        with open(init_file, encoding="utf-8", errors="replace") as handle:
            return ADVERTISES in handle.read()
    except OSError:
        return False


@functools.lru_cache(maxsize=1)
def installed_plugins() -> Tuple[PluginPackage, ...]:
    """The plugin packages importable here, first one on sys.path winning (as import would)."""
    seen: Dict[str, PluginPackage] = {}
    for entry in sys.path:
        folder = entry or "."
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        dists: Optional[Dict[str, Tuple[str, Optional[str]]]] = None
        for name in sorted(names):
            if not name.lower().startswith(PREFIX) or name in seen or "." in name:
                continue
            init_file = os.path.join(folder, name, "__init__.py")
            if not _advertises_library(init_file):
                continue
            if dists is None:
                dists = _dist_infos(folder, names)
            distribution, version = dists.get(name, (None, None))
            seen[name] = PluginPackage(name, os.path.join(folder, name), distribution, version)
    return tuple(seen.values())


def load_package(package: PluginPackage) -> PluginLibrary:
    """Import a plugin package's module for its library path and provider names."""
    import importlib

    try:
        module = importlib.import_module(package.module)
        path = str(module.get_library_path())
        if hasattr(module, "get_ep_names"):
            ep_names = tuple(str(n) for n in module.get_ep_names())
        elif hasattr(module, "get_ep_name"):
            ep_names = (str(module.get_ep_name()),)
        else:
            ep_names = ()
    except Exception as exc:  # noqa: BLE001 - a third-party package may fail in any way
        raise InferenceError(f"plugin package {package.describe()} ({package.module}) could not give its "
                             f"library: {type(exc).__name__}: {exc}",
                             hint="reinstall it, or give its library with --ep-library NAME=PATH") from exc
    return PluginLibrary(registration=ep_names[0] if ep_names else package.module, path=path,
                         ep_names=ep_names, package=package)


_ORT_PREFIX = re.compile(r"^\[ONNXRuntimeError\]\s*:\s*\d+\s*:\s*\w+\s*:\s*")
_REGISTERED: Dict[str, str] = {}
"""library path -> the name it was registered under, in this process."""


def register(library: PluginLibrary) -> str:
    """Register `library` with onnxruntime once per process; the name it is registered under.

    onnxruntime refuses a second registration of one name; a worker forked from a process that had
    registered it inherits onnxruntime's registry, so "already registered" counts as done."""
    import onnxruntime as ort

    real = os.path.realpath(library.path)
    if real in _REGISTERED:
        return _REGISTERED[real]
    source = library.package.describe() if library.package else f"--ep-library {library.registration}"
    if not os.path.isfile(real):
        raise UsageError(f"execution provider library '{library.path}' ({source}) not found",
                         hint="give an existing shared library with --ep-library NAME=PATH")
    try:
        ort.register_execution_provider_library(library.registration, real)
    except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own types
        text = " ".join(str(exc).split())
        if "already registered" not in text:
            # the user's own file (--ep-library) is a usage error; an installed package's, the environment's
            error = InferenceError if library.package is not None else UsageError
            raise error(f"onnxruntime could not register the execution provider library "
                                 f"'{library.path}' ({source}): {_ORT_PREFIX.sub('', text)}",
                                 hint="a plugin library exports CreateEpFactories; check that it matches "
                                      f"onnxruntime {getattr(ort, '__version__', '?')}") from exc
    _REGISTERED[real] = library.registration
    return library.registration


def short_name(provider: str) -> str:
    """`OpenVINOExecutionProvider` -> `openvino`: the alias every provider answers to."""
    name = provider.split(".", 1)[0]
    if name.endswith("ExecutionProvider"):
        name = name[: -len("ExecutionProvider")]
    return name.lower()


def matches(asked: str, provider: str) -> bool:
    """Whether a name given by the user (`openvino`, `OpenVINOExecutionProvider`) names `provider`."""
    key = asked.strip()
    return key == provider or key.lower() == short_name(provider) or key.lower() == provider.lower()


def parse_library(spec: str) -> Tuple[str, str]:
    """`NAME=PATH` of `--ep-library` -> (name, absolute path)."""
    name, sep, path = spec.partition("=")
    if not sep or not name.strip() or not path.strip():
        raise UsageError(f"--ep-library '{spec}' is not of the form NAME=PATH",
                         hint="e.g. --ep-library openvino=/opt/ep/libonnxruntime_providers_openvino_plugin.so")
    return name.strip(), os.path.abspath(os.path.expanduser(path.strip()))


_STDOUT_LOCK = threading.Lock()
_STDOUT_USERS = [0, -1]
"""[sessions being built with stdout sent to stderr, the saved stdout descriptor]."""


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send what native code prints to file descriptor 1 to stderr while a plugin provider builds a
    session: QNN's backend prints a line to stdout when it loads, which would break `--json -`.
    Sessions built side by side on threads share one redirection (counted)."""
    with _STDOUT_LOCK:
        if _STDOUT_USERS[0] == 0:
            try:
                sys.stdout.flush()
                _STDOUT_USERS[1] = os.dup(1)
                os.dup2(2, 1)
            except (OSError, ValueError):  # no descriptors to swap (an embedding host): leave it be
                _STDOUT_USERS[1] = -1
        _STDOUT_USERS[0] += 1
    try:
        yield
    finally:
        with _STDOUT_LOCK:
            _STDOUT_USERS[0] -= 1
            if _STDOUT_USERS[0] == 0 and _STDOUT_USERS[1] >= 0:
                os.dup2(_STDOUT_USERS[1], 1)
                os.close(_STDOUT_USERS[1])
                _STDOUT_USERS[1] = -1
