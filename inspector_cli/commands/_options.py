"""Option decorators and value types shared by the commands, and builders of config objects.

Only this package and cli.py touch click. Heavy modules (onnx, onnxruntime, numpy-based core) are
imported inside functions, so importing a command module stays cheap.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import click

F = Callable[..., Any]

OPT_LEVELS = ("disable", "basic", "extended", "all")
FORMATS = ("table", "markdown", "csv", "json")


class NumberOrNamedNumber(click.ParamType):
    """'0.99' or 'NAME=0.99': a threshold, optionally for one tensor (name or glob)."""

    name = "[NAME=]NUMBER"

    def convert(self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]) -> str:
        text = str(value).strip()
        target, sep, number = text.rpartition("=")
        try:
            float(number if sep else text)
        except ValueError:
            self.fail(f"'{value}' is not a number or NAME=NUMBER", param, ctx)
        if sep and not target.strip():
            self.fail(f"'{value}': the name before '=' is empty", param, ctx)
        return text


class NamePair(click.ParamType):
    """'A=B': a pair of tensor names."""

    name = "A=B"

    def convert(self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]) -> str:
        text = str(value).strip()
        a, sep, b = text.partition("=")
        if not sep or not a.strip() or not b.strip():
            self.fail(f"'{value}' is not of the form A_NAME=B_NAME", param, ctx)
        return text


def compose(*decorators: F) -> F:
    def apply(func: F) -> F:
        for decorator in reversed(decorators):
            func = decorator(func)
        return func
    return apply


def model_argument(name: str) -> F:
    return click.argument(name, type=click.Path(exists=True, dir_okay=False))


def input_options(func: F) -> F:
    return compose(
        click.option("--inputs", "-i", multiple=True, type=click.Path(exists=True),
                     help="Samples: a folder or files (.npz, .npy, .pb, test_data_set_N/). Repeatable. "
                          "Without it, synthetic samples are generated."),
        click.option("--samples", type=click.IntRange(min=1), default=1, show_default=True,
                     help="Number of synthetic samples (without --inputs)."),
        click.option("--seed", type=int, default=0, show_default=True, help="Seed of synthetic samples."),
        click.option("--val-range", multiple=True, metavar="[NAME:]LO,HI",
                     help="Value range of synthetic inputs (default 0,1 for floats). Repeatable."),
        click.option("--shape", multiple=True, metavar="NAME:DIMS",
                     help="Fix an input's shape, e.g. input:1x3x224x224 (needed for dynamic dims). Repeatable."),
    )(func)


def decoding_options(func: F) -> F:
    """How image files and raw .bin dumps become tensors (see build_reader_options)."""
    return compose(
        click.option("--preprocess", type=click.Path(exists=True, dir_okay=False), metavar="FILE",
                     help="Preprocessing spec (YAML) for image inputs (.png/.jpg/.bmp): resize, center-crop, "
                          "scale, mean, std, channel-order, layout, dtype."),
        click.option("--preprocess-set", multiple=True, metavar="KEY=VALUE",
                     help="Set one preprocessing key (wins over --preprocess), e.g. resize=256, scale=1/255. "
                          "Repeatable."),
        click.option("--raw-dtype", multiple=True, metavar="[NAME:]DTYPE",
                     help="dtype of raw .bin dumps (default: the model's), e.g. x:uint8 or >f4. Repeatable."),
        click.option("--raw-shape", multiple=True, metavar="[NAME:]DIMS",
                     help="Shape of raw .bin dumps (default: the model's static shape), e.g. x:1x3x224x224. "
                          "Repeatable."),
    )(func)


def build_reader_options(params: Dict[str, Any]) -> Dict[str, Any]:
    """Reader options for `open_samples` from the decoding flags (empty when none was given)."""
    options: Dict[str, Any] = {}
    if params.get("preprocess") or params.get("preprocess_set"):  # else no yaml import (issue 16)
        from ..config.preprocess import spec_from_flags

        spec = spec_from_flags(params.get("preprocess"), params.get("preprocess_set") or ())
        if spec is not None:
            options["preprocess"] = spec
    if params.get("raw_dtype") or params.get("raw_shape"):
        from ..core.raw_dumps import raw_options

        raw = raw_options(params.get("raw_dtype") or (), params.get("raw_shape") or ())
        if raw is not None:
            options["raw"] = raw
    return options


def runtime_options(func: F) -> F:
    return compose(
        click.option("--providers", default="cpu", show_default=True, metavar="LIST",
                     help="onnxruntime execution providers in priority order, e.g. cuda,cpu."),
        click.option("--opt-level", type=click.Choice(OPT_LEVELS), default="all", show_default=True,
                     help="onnxruntime graph optimisation level (recorded in the result)."),
        click.option("--intra-op-threads", type=click.IntRange(min=0), default=0,
                     help="onnxruntime intra-op threads (0 = onnxruntime's default)."),
        click.option("--custom-op-lib", multiple=True, type=click.Path(exists=True, dir_okay=False),
                     help="Shared library of custom ops to register. Repeatable."),
        *plugin_provider_options(),
    )(func)


def refused_model_options(func: F) -> F:
    """--rename-duplicate-nodes: analyse a copy of a model onnxruntime refuses for its node names."""
    return click.option("--rename-duplicate-nodes", is_flag=True, default=False,
                        help="A model whose nodes share names does not load in onnxruntime, so commands that "
                             "run it stop (exit 3); with this flag they analyse a copy with the later nodes "
                             "renamed, recorded in the result (the deployed runtime still refuses the file)."
                        )(func)


DEVICES = ("cpu", "gpu", "npu")
EP_POLICIES = ("default", "prefer-cpu", "prefer-gpu", "prefer-npu", "max-performance", "max-efficiency", "min-power")
"""The choices of --ep-policy (core/providers.POLICIES; kept here so --help imports no core module)."""


def plugin_provider_options() -> Tuple[F, ...]:
    """Plugin execution providers: devices, per-provider options, libraries, policy (docs/providers.md)."""
    return (
        click.option("--device", type=click.Choice(DEVICES), default=None,
                     help="Run each provider on its device of this type, among onnxruntime's EP devices "
                          "(plugin providers, e.g. openvino on npu)."),
        click.option("--provider-option", multiple=True, type=ProviderOption(), metavar="PROVIDER:KEY=VALUE",
                     help="An option of one provider, e.g. openvino:num_of_threads=2 or qnn:backend_type=htp. "
                          "Repeatable."),
        click.option("--ep-library", multiple=True, type=NamePath(), metavar="NAME=PATH",
                     help="A plugin execution provider library on disk, registered under NAME (--providers NAME "
                          "uses it). Installed plugin packages need none. Repeatable."),
        click.option("--ep-policy", type=click.Choice(EP_POLICIES), default=None, metavar="POLICY",
                     help="Let onnxruntime pick the providers and devices by this policy among every installed "
                          "plugin's devices (instead of --providers): prefer-npu, prefer-gpu, prefer-cpu, "
                          "max-performance, max-efficiency, min-power or default."),
    )


class ProviderOption(click.ParamType):
    """'PROVIDER:KEY=VALUE': one option of one execution provider."""

    name = "PROVIDER:KEY=VALUE"

    def convert(self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]) -> str:
        text = str(value).strip()
        provider, colon, rest = text.partition(":")
        key, equals, _ = rest.partition("=")
        if not colon or not equals or not provider.strip() or not key.strip():
            self.fail(f"'{value}' is not of the form PROVIDER:KEY=VALUE (e.g. openvino:device_type=NPU)", param, ctx)
        return text


class NamePath(click.ParamType):
    """'NAME=PATH' of an existing file."""

    name = "NAME=PATH"

    def convert(self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]) -> str:
        import os

        text = str(value).strip()
        name, sep, path = text.partition("=")
        if not sep or not name.strip() or not path.strip():
            self.fail(f"'{value}' is not of the form NAME=PATH", param, ctx)
        if not os.path.isfile(os.path.expanduser(path.strip())):
            self.fail(f"'{path.strip()}' ({name.strip()}): no such file", param, ctx)
        return text


def placement_options(func: F) -> F:
    """--require-provider: exit 1 when a node runs elsewhere (docs/providers.md)."""
    return click.option("--require-provider", metavar="NAME", default=None,
                        help="Fail (exit 1, finding MI871) when any node runs on another execution provider "
                             "than NAME (e.g. openvino), naming those nodes.")(func)


def report_options(func: F, formats: Sequence[str] = FORMATS) -> F:
    return compose(
        click.option("--json", "json_path", type=click.Path(dir_okay=False, allow_dash=True), metavar="PATH|-",
                     help="Write the versioned JSON result (written before exiting 1); '-' for stdout."),
        click.option("--format", "fmt", type=click.Choice(list(formats)), default="table", show_default=True,
                     help=f"Form of stdout: rich table, {', '.join(formats[1:-1])} or {formats[-1]}."),
        click.option("--html", "html_path", type=click.Path(dir_okay=False), metavar="PATH",
                     help="Write a self-contained HTML report (before exiting 1)."),
        click.option("--junit", "junit_path", type=click.Path(dir_okay=False), metavar="PATH",
                     help="Write JUnit XML: one test case per gate or check."),
        click.option("--model-explorer", "model_explorer_path", type=click.Path(dir_okay=False), metavar="PATH",
                     help="Write Model Explorer node data (per-tensor values to overlay on the graph)."),
    )(func)


def report_options_with(*extra_formats: str) -> Callable[[F], F]:
    """`report_options` with more `--format` choices (e.g. 'sarif'); emit() needs a formatter for each."""
    return lambda func: report_options(func, FORMATS + tuple(extra_formats))


def build_runtime(params: Dict[str, Any]) -> Any:
    from ..core.plugin_eps import parse_library
    from ..core.providers import check_option_targets
    from ..core.runner import OptLevel, RuntimeConfig

    providers = tuple(p.strip() for p in str(params.get("providers") or "cpu").split(",") if p.strip())
    options = []
    for text in params.get("provider_option") or ():
        provider, _, rest = text.partition(":")
        key, _, value = rest.partition("=")
        options.append((provider.strip(), key.strip(), value.strip()))
    if not any(params.get(f"{side}_providers") for side in "ab"):  # compare checks both sides' lists
        check_option_targets(options, [providers or ("cpu",)])
    return RuntimeConfig(providers=providers or ("cpu",), opt_level=OptLevel(params.get("opt_level") or "all"),
                         intra_op_threads=params.get("intra_op_threads") or None,
                         custom_op_libs=tuple(params.get("custom_op_lib") or ()),
                         device=params.get("device") or None, provider_options=tuple(options),
                         ep_libraries=tuple(parse_library(s) for s in params.get("ep_library") or ()),
                         ep_policy=params.get("ep_policy") or None,
                         rename_duplicate_nodes=bool(params.get("rename_duplicate_nodes")))


def build_synthetic(params: Dict[str, Any]) -> Any:
    from ..core.synthetic import make_synthetic_spec

    return make_synthetic_spec(params.get("samples") or 1, params.get("seed") or 0,
                               params.get("val_range") or (), params.get("shape") or ())


def name_pairs(values: Sequence[str]) -> Tuple[Tuple[str, str], ...]:
    from ..core.io_match import parse_name_map

    return tuple(parse_name_map(values))


class ByteSize(click.ParamType):
    """'512M', '2G', '1.5GB' or a number of bytes."""

    name = "SIZE"

    def convert(self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]) -> int:
        if isinstance(value, int):
            return value
        from ..core.capture import parse_size

        try:
            return parse_size(str(value))
        except ValueError:
            self.fail(f"'{value}' is not a size such as 512M, 2G or 1048576", param, ctx)


def executor_options(func: F) -> F:
    """Where a batch runs: this process, local worker processes or Ray actors (see README 'Running at scale')."""
    return compose(
        click.option("--workers", type=click.IntRange(min=0), default=0, show_default=True,
                     help="Workers, each loading the model once and keeping its sessions: processes on this machine "
                          "(0 runs in this process), or with --executor ray actors (0: one per CPU of the cluster). "
                          "A worker that dies is replaced; its work is retried once, then reported as an error."),
        click.option("--executor", type=click.Choice(("local", "ray")), default="local", show_default=True,
                     help="local: this machine; ray: Ray actors on a cluster (pip install 'model-inspector[ray]'). "
                          "Results are the same whichever runs them."),
        click.option("--address", metavar="auto|ray://HOST:10001|local",
                     help="With --executor ray: 'auto' (the cluster running here), 'ray://HOST:10001' (Ray Client) or "
                          "'local' (a private instance for this run). Default: RAY_ADDRESS, else a running cluster, "
                          "else local."),
        click.option("--worker-memory", type=ByteSize(), metavar="SIZE",
                     help="Memory limit per worker, e.g. 4G: a worker that grows beyond it is stopped and its work "
                          "retried once, then reported as an error."),
    )(func)


def build_executor(params: Dict[str, Any]) -> Any:
    """The `ExecutorSpec` of the executor options (usage errors checked by the workflow)."""
    from ..executor.base import ExecutorSpec

    return ExecutorSpec(engine=params.get("executor") or "local", workers=params.get("workers") or 0,
                        address=params.get("address") or None, memory_limit=params.get("worker_memory") or None)
