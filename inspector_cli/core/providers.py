"""How a session gets its execution providers: built-in names, plugin packages, devices, options, policy.

`plan_providers(runtime)` resolves what a `RuntimeConfig` asks for, once per process (cached):
- a name onnxruntime's build holds (`cpu`, `cuda`, a replacement build's `openvino`) is a built-in,
  given to the session by name with its `--provider-option`s, as onnxruntime has always taken them;
- any other name is looked up among the plugin libraries given with `--ep-library NAME=PATH` and the
  plugin packages installed beside onnxruntime (core/plugin_eps.py), registered, and given to the
  session through its devices (`SessionOptions.add_provider_for_devices`): a plugin provider's name in
  the session's provider list is ignored by onnxruntime without a word (the session then runs on CPU);
- `--device cpu|gpu|npu` picks each provider's device among `onnxruntime.get_ep_devices()`, which
  puts every provider of the session on the device route;
- `--ep-policy` leaves the choice to onnxruntime's selection policy over every registered device.
The plan records what it resolved (package, version, library, device and its metadata) for the
result's runtime section (`RuntimeConfig.to_dict`).
"""
from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

from ..errors import MiError, UsageError
from .plugin_eps import PluginLibrary, installed_plugins, load_package, matches, register, short_name, stdout_to_stderr

if TYPE_CHECKING:  # pragma: no cover
    from .runner import RuntimeConfig

CPU = "CPUExecutionProvider"
PROVIDER_ALIASES: Dict[str, str] = {
    "cpu": CPU,
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
    "trt": "TensorrtExecutionProvider",
    "rocm": "ROCMExecutionProvider",
    "migraphx": "MIGraphXExecutionProvider",
    "openvino": "OpenVINOExecutionProvider",
    "dml": "DmlExecutionProvider",
    "coreml": "CoreMLExecutionProvider",
    "qnn": "QNNExecutionProvider",
    "xnnpack": "XnnpackExecutionProvider",
    "azure": "AzureExecutionProvider",
    "webgpu": "WebGpuExecutionProvider",
}
DEVICE_TYPES = ("cpu", "gpu", "npu")
POLICIES: Dict[str, str] = {
    "default": "DEFAULT", "prefer-cpu": "PREFER_CPU", "prefer-gpu": "PREFER_GPU", "prefer-npu": "PREFER_NPU",
    "max-performance": "MAX_PERFORMANCE", "max-efficiency": "MAX_EFFICIENCY", "min-power": "MIN_OVERALL_POWER",
}
"""`--ep-policy` choices -> onnxruntime's `OrtExecutionProviderDevicePolicy` members."""


def provider_name(name: Optional[str]) -> Optional[str]:
    """onnxruntime's name of a provider given as an alias (`openvino`) or in full."""
    if not name:
        return None
    key = name.strip()
    return PROVIDER_ALIASES.get(key.lower(), key)


@dataclass
class ProviderChoice:
    """One provider of a session, resolved."""

    asked: str
    name: str
    """onnxruntime's name."""
    library: Optional[PluginLibrary] = None
    """The plugin library it comes from (None: built into this onnxruntime)."""
    devices: List[Any] = field(default_factory=list)
    """The `OrtEpDevice`s it runs on (device route only)."""
    options: Dict[str, str] = field(default_factory=dict)

    def facts(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"name": self.name, "source": "plugin" if self.library else "built-in"}
        if self.library is not None:
            package = self.library.package
            out.update(package=package.distribution or package.module if package else None,
                       version=package.version if package else None, library=self.library.path)
        if self.devices:
            out["devices"] = [device_facts(d) for d in self.devices]
        if self.options:
            out["options"] = dict(self.options)
        return out


@dataclass
class ProviderPlan:
    """What a session is given: by name (`providers`) or by device, or a selection policy."""

    choices: List[ProviderChoice]
    by_device: bool = False
    policy: Optional[str] = None
    registered: List[PluginLibrary] = field(default_factory=list)
    """Libraries registered for the policy to choose among."""
    selected: List[str] = field(default_factory=list)
    """The providers the policy chose, as the last session built with this plan reported them."""

    @property
    def names(self) -> List[str]:
        """onnxruntime's names of the providers asked for, in priority order (the policy's choice)."""
        return list(self.selected) if self.policy else [c.name for c in self.choices]

    def configure(self, options: Any) -> Dict[str, Any]:
        """Give `options` (a SessionOptions) the devices or the policy; the keyword arguments of
        `InferenceSession` for the providers given by name (none on the device route)."""
        if self.policy:
            import onnxruntime as ort

            options.set_provider_selection_policy(getattr(ort.OrtExecutionProviderDevicePolicy,
                                                          POLICIES[self.policy]))
            return {}
        if self.by_device:
            for choice in self.choices:
                options.add_provider_for_devices(choice.devices, dict(choice.options))
            return {}
        return {"providers": [c.name for c in self.choices],
                "provider_options": [dict(c.options) for c in self.choices]}

    def facts(self) -> List[Dict[str, Any]]:
        """JSON-ready: each provider with its source, package, version, library, devices, options."""
        if self.policy:
            return [{"policy": self.policy, "selected": list(self.selected),
                     "registered": [_library_facts(lib) for lib in self.registered]}]
        return [c.facts() for c in self.choices]

    @property
    def uses_plugins(self) -> bool:
        return bool(self.policy) or any(c.library is not None for c in self.choices)

    def building(self) -> Any:
        """Around a session build: a plugin's native prints to stdout go to stderr (`--json -`)."""
        import contextlib

        return stdout_to_stderr() if self.uses_plugins else contextlib.nullcontext()

    def hint(self) -> Optional[str]:
        """What to check when a session with plugin providers fails to build."""
        plugins = [c for c in self.choices if c.library is not None]
        if not plugins:
            return None
        named = ", ".join(f"{c.name} from {_library_facts(c.library)['source']}" for c in plugins)
        return (f"{named}; a provider's own settings go with --provider-option "
                f"{short_name(plugins[0].name)}:KEY=VALUE (docs/providers.md)")


def device_facts(device: Any) -> Dict[str, Any]:
    """An `OrtEpDevice` as JSON: the hardware device (type, vendor, ids, metadata) and what the
    provider says of it (vendor, metadata, default options)."""
    hw = device.device
    kind = getattr(hw.type, "name", str(hw.type)).rsplit(".", 1)[-1]
    return {"type": kind, "vendor": hw.vendor, "vendor_id": int(hw.vendor_id), "device_id": int(hw.device_id),
            "metadata": dict(hw.metadata), "ep_vendor": device.ep_vendor, "ep_metadata": dict(device.ep_metadata),
            "ep_options": dict(device.ep_options)}


def _library_facts(library: PluginLibrary) -> Dict[str, Any]:
    package = library.package
    source = package.describe() if package else f"--ep-library {library.registration}"
    return {"source": source, "package": (package.distribution or package.module) if package else None,
            "version": package.version if package else None, "library": library.path,
            "providers": list(library.ep_names)}


_PLANNING = threading.RLock()
"""One resolution at a time: sessions are built on several threads (compare's early sessions), and a
registration half done on one thread must not make another take the plugin for a built-in."""


def plan_providers(runtime: "RuntimeConfig") -> ProviderPlan:
    """The resolved providers of `runtime` (once per process and settings)."""
    with _PLANNING:
        return _plan(tuple(runtime.providers), getattr(runtime, "device", None),
                 tuple(getattr(runtime, "provider_options", ())), tuple(getattr(runtime, "ep_libraries", ())),
                 getattr(runtime, "ep_policy", None))


def asked_names(runtime: "RuntimeConfig") -> List[str]:
    """onnxruntime's names of the providers `runtime` asks for, without importing onnxruntime when
    every name is a known alias or in full (`OpenVINOExecutionProvider`); a policy's choice as the
    sessions of this process reported it (empty before any)."""
    if getattr(runtime, "ep_policy", None) is None and all(_known(p) for p in runtime.providers):
        return [provider_name(p) for p in runtime.providers] or [CPU]  # type: ignore[misc]
    try:
        return plan_providers(runtime).names
    except UsageError:  # reported where the session is built
        return [provider_name(p) for p in runtime.providers]  # type: ignore[misc]


def runtime_facts(runtime: "RuntimeConfig") -> Dict[str, Any]:
    """The runtime section's provider part: the settings given, and for a run beyond the CPU provider
    what each provider resolved to (source, package, version, library, device and its metadata)."""
    out: Dict[str, Any] = {}
    if runtime.device:
        out["device"] = runtime.device
    if runtime.provider_options:
        grouped: Dict[str, Dict[str, str]] = {}
        for provider, key, value in runtime.provider_options:
            grouped.setdefault(provider, {})[key] = value
        out["provider_options"] = grouped
    if runtime.ep_libraries:
        out["ep_libraries"] = dict(runtime.ep_libraries)
    if runtime.ep_policy:
        out["ep_policy"] = runtime.ep_policy
    if not out and all(provider_name(p) == CPU for p in runtime.providers):
        return out  # the default run: its section stays as it always was
    try:
        out["execution_providers"] = plan_providers(runtime).facts()
    except MiError:  # the session build reports it, with its exit code
        pass
    return out


def _known(name: str) -> bool:
    key = name.strip()
    return key.lower() in PROVIDER_ALIASES or key.endswith("ExecutionProvider")


@functools.lru_cache(maxsize=None)
def _plan(providers: Tuple[str, ...], device: Optional[str], options: Tuple[Tuple[str, str, str], ...],
          libraries: Tuple[Tuple[str, str], ...], policy: Optional[str]) -> ProviderPlan:
    import onnxruntime as ort

    given = [PluginLibrary(registration=name, path=path) for name, path in libraries]
    asked = [p.strip() for p in providers if p.strip()] or ["cpu"]
    if policy is not None:
        if asked != ["cpu"] or device:
            raise UsageError("--ep-policy lets onnxruntime choose the providers and devices",
                             hint="leave --providers and --device out with --ep-policy")
        _need_devices(ort, "--ep-policy")
        registered = [_register(ort, lib) for lib in given]
        for package in installed_plugins():
            registered.append(_register(ort, load_package(package)))
        return ProviderPlan(choices=[], policy=policy, registered=registered)
    given = [_register(ort, lib) for lib in given]
    builtin = [n for n in ort.get_available_providers() if n not in _plugin_names(ort)]
    choices: List[ProviderChoice] = []
    for raw in asked:
        name = provider_name(raw) or raw
        if name in builtin:
            choices.append(ProviderChoice(raw, name))
            continue
        library = _find_library(ort, raw, given, builtin)
        ep_name = next((n for n in library.ep_names if matches(raw, n)), library.ep_names[0])
        choices.append(ProviderChoice(raw, ep_name, library))
    by_device = bool(device) or any(c.library is not None for c in choices)
    if by_device:
        _need_devices(ort, f"--device {device}" if device else "a plugin provider")
        devices = list(ort.get_ep_devices())
        for choice in choices:
            choice.devices = _pick_devices(choice, devices, device)
        if device and all(c.name == CPU for c in choices) and device != "cpu":
            raise UsageError(f"--device {device}: CPUExecutionProvider runs on the CPU only",
                             hint="name the provider that runs on it with --providers")
    _attach_options(choices, options)
    return ProviderPlan(choices=choices, by_device=by_device)


_ALL_LIBRARIES: List[PluginLibrary] = []
"""Every plugin library registered in this process, with the providers it holds."""


def _plugin_names(ort: Any) -> set:
    """Providers of registered plugin libraries: onnxruntime lists them among its available providers
    once registered, yet a session ignores them by name. Ours, and any whose devices name a library
    (a plugin's devices carry `library_path` in their metadata, a built-in's do not)."""
    names = {n for lib in _ALL_LIBRARIES for n in lib.ep_names}
    if hasattr(ort, "get_ep_devices"):
        names |= {d.ep_name for d in ort.get_ep_devices() if "library_path" in dict(d.ep_metadata)}
    return names


def _need_devices(ort: Any, what: str) -> None:
    if not hasattr(ort, "get_ep_devices"):
        raise UsageError(f"{what} needs onnxruntime's plugin execution providers (onnxruntime 1.22 or newer); "
                         f"this is onnxruntime {getattr(ort, '__version__', '?')}",
                         hint="pip install -U onnxruntime")


def _register(ort: Any, library: PluginLibrary) -> PluginLibrary:
    """Register `library`; when its package did not name its providers, they are the providers of
    the devices that appeared with it."""
    known = next((lib for lib in _ALL_LIBRARIES if lib.path == library.path), None)
    if known is not None:
        return known
    before = {d.ep_name for d in ort.get_ep_devices()} if hasattr(ort, "get_ep_devices") else set()
    register(library)
    if not library.ep_names and hasattr(ort, "get_ep_devices"):
        appeared = tuple(sorted({d.ep_name for d in ort.get_ep_devices()} - before))
        library = PluginLibrary(library.registration, library.path, appeared, library.package, library.facts)
    _ALL_LIBRARIES.append(library)
    return library


def _find_library(ort: Any, raw: str, given: Sequence[PluginLibrary], builtin: Sequence[str]) -> PluginLibrary:
    """The plugin library that holds provider `raw`: one given with --ep-library (by its NAME or its
    providers), else an installed package (those whose name holds the provider's short name first)."""
    for library in given:
        if raw.strip().lower() == library.registration.lower() or any(matches(raw, n) for n in library.ep_names):
            if not library.ep_names:
                raise UsageError(f"execution provider library '{library.registration}' ({library.path}) offers "
                                 f"no device on this machine", hint=_devices_hint(ort))
            return library
    wanted = short_name(provider_name(raw) or raw).replace("_", "")
    packages = sorted(installed_plugins(), key=lambda p: wanted not in p.module.replace("_", "").lower())
    for package in packages:
        library = load_package(package)
        if any(matches(raw, n) for n in library.ep_names):
            return _register(ort, library)
    installed = ", ".join(f"{p.describe()} ({p.module})" for p in installed_plugins()) or "none"
    raise UsageError(f"execution provider '{raw}' is not available in this onnxruntime build nor in an "
                     f"installed plugin package",
                     hint=f"built in: {', '.join(builtin)}; plugin packages: {installed}; install its plugin "
                          f"package (e.g. pip install onnxruntime-ep-openvino) or give its library with "
                          f"--ep-library NAME=PATH")


def _pick_devices(choice: ProviderChoice, devices: Sequence[Any], wanted: Optional[str]) -> List[Any]:
    """The device `choice` runs on: of the `--device` type when given (the CPU provider, the fallback,
    keeps its CPU), else the first the provider offers."""
    own = [d for d in devices if d.ep_name == choice.name]
    source = f" ({_library_facts(choice.library)['source']})" if choice.library else ""
    if not own:
        if choice.library is not None:
            origin = _library_facts(choice.library)["source"]
            raise UsageError(f"execution provider '{choice.asked}' ({choice.name} from {origin}) is registered but "
                             f"offers no device on this machine", hint=_devices_hint_from(devices))
        raise UsageError(f"{choice.name} is built into this onnxruntime without a device of its own, so it "
                         f"cannot be combined with plugin providers or --device",
                         hint=f"its settings go with --provider-option {short_name(choice.name)}:KEY=VALUE "
                              f"(e.g. device_type)")
    if wanted and choice.name != CPU:
        typed = [d for d in own if device_facts(d)["type"].lower() == wanted]
        if not typed:
            kinds = ", ".join(sorted({device_facts(d)["type"] for d in own}))
            raise UsageError(f"--device {wanted}: {choice.name}{source} offers no {wanted.upper()} device here "
                             f"(its devices: {kinds})", hint="leave --device out, or pick one it offers")
        own = typed
    return own[:1]


def _devices_hint(ort: Any) -> str:
    return _devices_hint_from(list(ort.get_ep_devices()))


def _devices_hint_from(devices: Sequence[Any]) -> str:
    shown = sorted({f"{d.ep_name} on {device_facts(d)['type']} ({d.device.vendor})" for d in devices})
    return ("onnxruntime's devices here: " + "; ".join(shown) +
            "; a provider offers only the devices its library supports (a vendor's provider, its vendor's devices)")


def _attach_options(choices: List[ProviderChoice], options: Sequence[Tuple[str, str, str]]) -> None:
    """Each option to the provider it names; an option for a provider this runtime does not ask for is
    another session's (compare's A and B share the options; `check_option_targets` refuses typos)."""
    for provider, key, value in options:
        target = next((c for c in choices if matches(provider, c.name) or provider.lower() == c.asked.lower()), None)
        if target is not None:
            target.options[key] = value


def check_option_targets(options: Sequence[Tuple[str, str, str]], provider_lists: Sequence[Sequence[str]]) -> None:
    """A usage error for a `--provider-option` naming no provider of any session (no import)."""
    asked = [p for names in provider_lists for p in names]
    for provider, key, value in options:
        if not any(matches(provider, provider_name(p) or p) or provider.lower() == p.lower() for p in asked):
            raise UsageError(f"--provider-option {provider}:{key}={value}: '{provider}' is not among the providers "
                             f"asked for ({', '.join(dict.fromkeys(asked))})",
                             hint="name a provider of --providers before the colon")
