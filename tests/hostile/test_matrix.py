"""The bad-input matrix (issues 15, 28): each hostile input with its exact exit code and message.

Every case runs `mi` as a real process (`python -m inspector_cli`: the status the OS reports, so an
abort at interpreter exit or a death by signal is seen, as a CI gate sees it) and asserts: the exit
status; for exit 2/3 exactly one `Error:` line on stderr holding the expected text; no traceback; no
raw escape character on stdout or stderr; and every file of the world (models, samples, configs)
byte-identical afterwards. The processes run two at a time (`PARALLEL`): each case has its own
working folder, and nothing a case asserts depends on the others.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Dict, Optional, Sequence, Tuple

import pytest

from ..fixtures.subproc import Ran, assert_status, run_mi
from .world import build_world

PARALLEL = 2


@dataclass(frozen=True)
class Case:
    id: str
    argv: Sequence[str]
    code: int
    message: str
    """Text of the one `Error:` line (exit 2/3), else text expected on stdout or stderr."""
    check: Optional[Callable[[str, str, Path], None]] = None


def _no_raw_controls(stdout: str, stderr: str, out: Path) -> None:
    for text in (stdout, stderr):
        assert "\x1b" not in text and "\x07" not in text
    assert "\\nFAIL: forged" in stdout  # shown, as an escape (long names are shortened from the left)
    for line in stdout.splitlines():
        assert not line.startswith("FAIL: forged")  # the newline in the name did not split a line


def _markdown_escaped(stdout: str, stderr: str, out: Path) -> None:
    _no_raw_controls(stdout, stderr, out)
    assert "<img" not in stdout and "|col" not in stdout.replace("\\|col", "")


def _markdown_escaped_in_full(stdout: str, stderr: str, out: Path) -> None:
    _markdown_escaped(stdout, stderr, out)
    assert "&lt;img src=x onerror=alert(1)>\\|col\\\\nFAIL: forged" in stdout


def _verdict_one_line(stdout: str, stderr: str, out: Path) -> None:
    _no_raw_controls(stdout, stderr, out)
    verdicts = [line for line in stdout.splitlines() if line.startswith("root cause:")]
    assert len(verdicts) == 1 and verdicts[0].rstrip().endswith("on sample synthetic_0000")


def _html_safe(stdout: str, stderr: str, out: Path) -> None:
    html = (out / "r.html").read_text()
    assert "\x1b" not in html and "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def _junit_valid(stdout: str, stderr: str, out: Path) -> None:
    import xml.etree.ElementTree as ET

    text = (out / "r.xml").read_text()
    assert "\x1b" not in text
    ET.fromstring(text)  # valid XML 1.0 (raw control characters would not parse)


def _trimmed(stdout: str, stderr: str, out: Path) -> None:
    assert "onnxruntime_src" not in stderr and "std::unordered_map" not in stderr and "[ONNXRuntimeError]" not in stderr


def _once_before_the_scan(stdout: str, stderr: str, out: Path) -> None:
    assert "could not be analysed" not in stderr and "(scan)" not in stderr  # not an error record per sample
    assert stdout == ""  # no result: the model was refused before any sample ran


def _input_origin(stdout: str, stderr: str, out: Path) -> None:
    assert "root cause: input 'x' already holds NaN/Inf on sample nan_in.npz" in stdout
    assert "first born at" not in stdout  # not the first consumer node


def _no_numpy_warning(stdout: str, stderr: str, out: Path) -> None:
    assert "invalid value" not in stderr and "RuntimeWarning" not in stderr  # silenced where it arises, not by -q


def _quiet_stderr(stdout: str, stderr: str, out: Path) -> None:
    assert stderr == ""  # numpy's RuntimeWarning (Inf + -Inf) silenced under -q


CASES = [
    # ---- configs (items 1, 10) ---------------------------------------------------------------
    Case("config-alias-bomb-c", ["-c", "{bomb}", "validate", "{m}"], 2,
         "bomb.yaml:6: YAML aliases expand to more than 10000 values"),
    Case("config-alias-bomb-check", ["config", "check", "{bomb}"], 2, "bomb.yaml:6: YAML aliases expand"),
    Case("config-alias-bomb-run", ["run", "{bomb}"], 2, "bomb.yaml:6: YAML aliases expand"),
    Case("config-recursive-alias", ["-c", "{recursive}", "validate", "{m}"], 2,
         "recursive.yaml:2: a YAML alias refers to the value that contains it"),
    Case("config-latin1-c", ["-c", "{latin1}", "validate", "{m}"], 2,
         "latin1.yaml:3: not UTF-8 text: byte 0xe9 at byte offset 43"),
    Case("config-latin1-check", ["config", "check", "{latin1}"], 2, "latin1.yaml:3: not UTF-8 text: byte 0xe9"),
    Case("config-latin1-run", ["run", "{latin1}"], 2, "latin1.yaml:3: not UTF-8 text"),
    Case("config-utf16", ["-c", "{utf16}", "validate", "{m}"], 2, "utf16.yaml:1: not UTF-8 text: byte 0xff at byte offset 0"),
    Case("config-bom-accepted", ["-c", "{bom}", "validate", "{m}"], 0, "PASS"),
    Case("config-bad-yaml", ["-c", "{badyaml}", "validate", "{m}"], 2, "badyaml.yaml:4: invalid YAML"),
    Case("config-python-tag", ["-c", "{tag}", "validate", "{m}"], 2, "tag.yaml:2: invalid YAML: could not determine a constructor"),
    Case("config-nul-byte", ["-c", "{nul}", "validate", "{m}"], 2,
         "nul.yaml:3: invalid YAML: unacceptable character #x0000: special characters are not allowed"),
    Case("config-nul-byte-check", ["config", "check", "{nul}"], 2, "nul.yaml:3: invalid YAML: unacceptable character"),
    Case("config-json-false", ["-c", "{json_false}", "validate", "{m}"], 2,
         "json_false.yaml:3: validate.json: expected a path, got false"),
    Case("config-not-mapping", ["-c", "{list}", "validate", "{m}"], 2, "list.yaml:1: a config must be a mapping"),
    Case("config-unknown-section", ["-c", "{unknown}", "validate", "{m}"], 2, "unknown.yaml:2: validat: unknown section"),
    Case("config-version-2", ["-c", "{v2}", "validate", "{m}"], 2, "v2.yaml:1: version: version 2 is not supported"),
    # ---- report paths (item 7) ----------------------------------------------------------------
    Case("report-json-is-model", ["validate", "{m}", "--json", "{m}"], 2, "is the input"),
    Case("report-html-is-model-b", ["compare", "{m}", "{m2}", "--html", "{m2}"], 2, "--html"),
    Case("report-json-symlink-to-model", ["validate", "{m}", "--json", "{link}"], 2, "is the input"),
    Case("report-json-hardlink-to-model", ["validate", "{m}", "--json", "{hard}"], 2, "is the input"),
    Case("report-json-is-config", ["-c", "{ok}", "validate", "{m}", "--json", "{ok}"], 2, "ok.yaml: is the input"),
    Case("report-json-is-sample", ["compare", "{m}", "{m2}", "-i", "{good_npz}", "--json", "{good_npz}"], 2,
         "is the input"),
    Case("report-json-inside-sample-dir", ["compare", "{m}", "{m2}", "-i", "{good_dir}", "--json", "{good_npz}"], 2,
         "is a file inside the input"),
    Case("report-sarif-is-model", ["validate", "{m}", "--sarif", "{m}"], 2, "--sarif"),
    Case("report-junit-is-model", ["probe", "{m}", "--junit", "{m}"], 2, "--junit"),
    Case("report-trace-is-model", ["profile", "{m}", "--trace", "{m}"], 2, "--trace"),
    Case("report-json-is-directory", ["validate", "{m}", "--json", "{dir}"], 2, "is a directory"),
    Case("report-json-missing-folder", ["validate", "{m}", "--json", "{out}/no/such/r.json"], 2, "does not exist"),
    # ---- sample files (item 8) ----------------------------------------------------------------
    Case("npz-truncated-inputs-show", ["inputs", "show", "{trunc10}", "-m", "{m}"], 3,
         "trunc10.npz: not a readable .npz file, truncated or corrupt (File is not a zip file)"),
    Case("npz-truncated-inputs-show-no-model", ["inputs", "show", "{trunc10}"], 3, "trunc10.npz: not a readable .npz"),
    Case("npz-truncated-compare", ["compare", "{m}", "{m2}", "-i", "{trunc_half}"], 3, "trunc_half.npz: not a readable .npz"),
    Case("npz-truncated-probe", ["probe", "{m}", "-i", "{trunc_half}"], 3, "trunc_half.npz: not a readable .npz"),
    Case("npz-truncated-nan-bisect", ["nan-bisect", "{m}", "-i", "{trunc10}"], 3, "trunc10.npz: not a readable .npz"),
    Case("npz-truncated-profile", ["profile", "{m}", "-i", "{trunc10}", "--runs", "2"], 3, "trunc10.npz: not a readable"),
    Case("npz-bad-crc", ["inputs", "show", "{crc}"], 3, "crc.npz: not a readable .npz file, truncated or corrupt ("),
    Case("npy-short-data", ["inputs", "show", "{npy_short}", "-m", "{m}"], 3,
         "short.npy: not a readable .npy file, truncated or corrupt (Failed to read all data"),
    Case("npy-five-bytes", ["inputs", "show", "{npy_5}", "-m", "{m}"], 3, "five.npy: not a .npy file, truncated or corrupt"),
    Case("npz-pickled", ["compare", "{m}", "{m2}", "-i", "{pickled}"], 3, "pickled.npz: cannot read .npz without unpickling"),
    Case("golden-pickled-npz", ["compare", "{m}", "--golden", "{golden_pickled}"], 3,
         "g.npz: cannot read .npz without unpickling"),
    Case("golden-truncated-npz", ["compare", "{m}", "--golden", "{golden_trunc}"], 3,
         "golden_trunc/g.npz: not a readable .npz file, truncated or corrupt"),
    Case("golden-zoo-junk-pb", ["compare", "{m}", "--golden", "{golden_zoo_junk}"], 3,
         "input_0.pb: not a readable ONNX TensorProto"),
    Case("pb-junk", ["inputs", "show", "{junk_pb}", "-m", "{m}"], 3, "junk.pb: not a readable ONNX TensorProto"),
    Case("pb-junk-no-model", ["inputs", "show", "{junk_pb}"], 3, "junk.pb: not a readable ONNX TensorProto"),
    # ---- synthetic inputs and flag values (items 13, 14) ---------------------------------------
    Case("synthetic-1e12-nan-bisect", ["nan-bisect", "{huge}"], 3,
         "input 'x' [1000000, 1000000]: a synthetic sample needs 3.6 TB (float32), more than the memory budget"),
    Case("synthetic-1e12-probe", ["probe", "{huge}"], 3, "--shape x:1x1000000"),
    Case("synthetic-1e12-profile", ["profile", "{huge}"], 3, "a synthetic sample needs 3.6 TB"),
    Case("synthetic-1e12-compare", ["compare", "{huge}", "{huge}"], 3, "a synthetic sample needs 3.6 TB"),
    Case("synthetic-dynamic-huge", ["nan-bisect", "{dyn}", "--shape", "x:99999999999x4"], 3,
         "input 'x' [99999999999, 4]: a synthetic sample needs 1.5 TB"),
    Case("max-memory-inf", ["nan-bisect", "{m}", "--max-memory", "inf"], 2, "Invalid value for '--max-memory': 'inf'"),
    Case("max-memory-1e400", ["nan-bisect", "{m}", "--max-memory", "1e400"], 2, "Invalid value for '--max-memory': '1e400'"),
    Case("max-memory-nan-compare", ["compare", "{m}", "{m2}", "--max-memory", "nan"], 2, "'--max-memory': 'nan'"),
    Case("capture-budget-inf", ["probe", "{m}", "--capture-budget", "inf"], 2, "Invalid value for '--capture-budget'"),
    Case("dump-max-bytes-negative", ["probe", "{m}", "--dump-max-bytes", "-5"], 2, "Invalid value for '--dump-max-bytes'"),
    Case("worker-memory-1e400", ["nan-bisect", "{m}", "--worker-memory", "1e400"], 2, "Invalid value for '--worker-memory'"),
    Case("val-range-nan", ["compare", "{m}", "{m2}", "--val-range", "x:nan,nan"], 2,
         "--val-range 'x:nan,nan': LOW and HIGH must be finite numbers"),
    Case("val-range-inf", ["nan-bisect", "{m}", "--val-range", "x:-inf,inf"], 2, "--val-range 'x:-inf,inf': LOW and HIGH"),
    Case("val-range-beyond-float32", ["nan-bisect", "{m}", "--val-range", "x:-1e39,1e39"], 2,
         "outside what float32 input 'x' can hold"),
    Case("shape-contradicts-static", ["nan-bisect", "{m}", "--shape", "x:2x4"], 2,
         "--shape x:2x4: dimension 0 is 2, but the model fixes it at 1 [1, 4]"),
    Case("shape-huge-on-static-dim", ["probe", "{dyn}", "--shape", "x:1x99999999999"], 2,
         "dimension 1 is 99999999999, but the model fixes it at 4"),
    Case("shape-overflow", ["compare", "{dyn}", "{dyn}", "--shape", "x:99999999999x99999999999"], 2,
         "more than any array can hold"),
    # ---- external data (items 4, 12) ----------------------------------------------------------
    Case("ext-sparse-validate", ["validate", "{ext_sparse}"], 1, "MI109"),
    Case("ext-sparse-probe", ["probe", "{ext_sparse}"], 3,
         "tensor 'sv': external data location '../../etc/passwd' resolves outside the model's folder"),
    Case("ext-sparse-nan-bisect", ["nan-bisect", "{ext_sparse}"], 3, "(sparse initializer)"),
    Case("ext-nul-validate", ["validate", "{ext_nul}"], 1, "MI109"),
    Case("ext-nul-compare", ["compare", "{ext_nul}", "{m}"], 3, "holds a NUL byte (unsafe; refused)"),
    Case("ext-offset-validate", ["validate", "{ext_offset}"], 1, "MI110"),
    Case("ext-offset-profile", ["profile", "{ext_offset}"], 3, "external data offset 'abc' is not a non-negative integer"),
    Case("ext-offset-compare-hint", ["compare", "{m}", "{ext_offset}"], 3,
         "is not a non-negative integer (refused) (the model's external_data entries are corrupt"),
    Case("ext-length-validate", ["validate", "{ext_length}"], 1, "MI110"),
    Case("ext-short-validate", ["validate", "{ext_short}"], 1, "MI110"),
    Case("ext-length-probe", ["probe", "{ext_length}"], 3, "external data length '-5' is not a non-negative integer"),
    Case("ext-subgraph-constant-validate", ["validate", "{ext_subgraph}"], 1, "MI109"),
    Case("ext-subgraph-constant-nan-bisect", ["nan-bisect", "{ext_subgraph}"], 3,
         "tensor 'cv': external data location '/etc/passwd' resolves outside the model's folder"),
    Case("non-utf8-name-probe", ["probe", "{non_utf8}"], 3,
         "non_utf8.onnx: not a valid ONNX protobuf (tensor name b'\\x80\\x80' of node 0 is not UTF-8 text)"),
    Case("non-utf8-name-validate", ["validate", "{non_utf8}"], 1, "MI102"),
    Case("ext-length-mismatch-probe", ["probe", "{ext_short}"], 3,
         "ext_short.onnx: tensor 'w': external data length 8 does not match the tensor's 16 bytes (float [1, 4])",
         _trimmed),
    # ---- models onnxruntime cannot load (item 16) ---------------------------------------------
    Case("ort-duplicate-nan-bisect-q", ["-q", "nan-bisect", "{dup}"], 3, "Duplicate definition of name (t)"),
    Case("ort-duplicate-json-stdout", ["nan-bisect", "{dup}", "--json", "-"], 3, "Duplicate definition of name (t)"),
    Case("ort-cycle-nan-bisect-q", ["-q", "nan-bisect", "{cycle}"], 3, "the graph is not acyclic"),
    Case("ort-custom-op-probe-q", ["-q", "probe", "{custom}"], 3,
         "custom.onnx: onnxruntime could not load the model: Fatal error: com.evil:FancyOp(-1) is not a registered"),
    Case("ort-opset99-nan-bisect-q", ["-q", "nan-bisect", "{opset99}"], 3,
         "ONNX Runtime only *guarantees* support for models stamped with official released onnx opset versions. "
         "Opset 99 is under development", _trimmed),
    Case("ort-duplicate-nan-bisect-samples-q", ["-q", "nan-bisect", "{dup}", "-i", "{good_dir}"], 3,
         "dup.onnx: onnxruntime could not load the model: This is an invalid model. Error: Duplicate definition of "
         "name (t).", _once_before_the_scan),
    Case("ort-cycle-nan-bisect-workers-json", ["nan-bisect", "{cycle}", "-i", "{good_dir}", "--workers", "2",
                                               "--json", "-"], 3,
         "cycle.onnx: onnxruntime could not load the model: This is an invalid model. Error: the graph is not acyclic.",
         _once_before_the_scan),
    Case("ort-custom-op-nan-bisect-samples-q", ["-q", "nan-bisect", "{custom}", "-i", "{good_dir}"], 3,
         "custom.onnx: onnxruntime could not load the model: Fatal error: com.evil:FancyOp(-1) is not a registered",
         _once_before_the_scan),
    Case("ort-opset99-profile", ["profile", "{opset99}"], 3, "Opset 99 is under development", _trimmed),
    # ---- part 2: probe history, nan-bisect JSONL, NaN in the input, numpy noise (items 5, 6, 17, 19) ----
    Case("probe-history-dir-through-a-file", ["probe", "{m}", "--history-dir", "{ok}/h"], 2,
         "ok.yaml/h: cannot write the probe history (Not a directory)"),
    Case("probe-history-dir-through-a-file-json", ["probe", "{m}", "--history-dir", "{ok}/h", "--json", "{out}/r.json"],
         2, "cannot write the probe history"),
    Case("probe-history-dir-is-a-file", ["probe", "{m}", "--history-dir", "{ok}"], 2,
         "Invalid value for '--history-dir'"),
    Case("jsonl-exists-without-resume", ["nan-bisect", "{m}", "--jsonl", "{old_jsonl}"], 2,
         "old.jsonl exists: use --resume or --overwrite"),
    Case("jsonl-exists-json-stdout-q", ["-q", "nan-bisect", "{m}", "--jsonl", "{old_jsonl}", "--json", "-"], 2,
         "old.jsonl exists: use --resume or --overwrite"),
    Case("jsonl-exists-with-workers", ["nan-bisect", "{m}", "-i", "{good_dir}", "--workers", "2", "--jsonl",
                                       "{old_jsonl}"], 2, "old.jsonl exists: use --resume or --overwrite"),
    Case("jsonl-resume-and-overwrite", ["nan-bisect", "{m}", "--jsonl", "{out}/n.jsonl", "--resume", "--overwrite"], 2,
         "--resume and --overwrite contradict each other"),
    Case("jsonl-missing-folder", ["nan-bisect", "{m}", "--jsonl", "{out}/no/such/n.jsonl"], 2, "does not exist"),
    Case("jsonl-is-the-sample", ["nan-bisect", "{m}", "-i", "{good_npz}", "--jsonl", "{good_npz}", "--overwrite"], 2,
         "is the input"),
    Case("nan-in-input-sample", ["nan-bisect", "{m}", "-i", "{nan_npz}"], 1,
         "FOUND: 1 sample(s) with NaN/Inf outputs, already in input 'x' in 1 of them (1/1 sample(s) scanned)",
         _input_origin),
    Case("nan-in-input-sample-json-q", ["-q", "nan-bisect", "{m}", "-i", "{nan_npz}", "--json", "-"], 1,
         "input 'x' of sample nan_in.npz already holds 1 NaN and 1 Inf value(s)"),
    Case("nan-in-input-sample-all", ["nan-bisect", "{m}", "-i", "{nan_npz}", "--all"], 1,
         "already in input 'x' in 1 of them", _input_origin),
    Case("fp16-overflow-deep-not-quiet", ["nan-bisect", "{fp16}", "--val-range", "x:-10,10", "--deep"], 1,
         "first born at mul (Mul)", _no_numpy_warning),
    Case("fp16-overflow-simulate-not-quiet", ["nan-bisect", "{fp16}", "--val-range", "x:-10,10", "--simulate", "fp16"],
         1, "first born at mul (Mul)", _no_numpy_warning),
    Case("fp16-overflow-all-quiet", ["-q", "nan-bisect", "{fp16}", "--val-range", "x:-10,10", "--all"], 1, "",
         _quiet_stderr),
    # ---- names (items 2, 3, 18) ---------------------------------------------------------------
    Case("names-validate-markdown", ["validate", "{evil}", "--format", "markdown"], 0, "PASS"),
    Case("names-probe-table", ["probe", "{evil}", "--val-range", "inp:1,2"], 0, "PASS", _no_raw_controls),
    Case("names-probe-csv", ["probe", "{evil}", "--val-range", "inp:1,2", "--format", "csv"], 0, "health",
         _no_raw_controls),
    Case("names-probe-markdown", ["probe", "{evil}", "--val-range", "inp:1,2", "--format", "markdown"], 0, "PASS",
         _markdown_escaped),
    Case("names-probe-list", ["probe", "{evil}", "--list"], 0, "Log", _no_raw_controls),
    Case("names-nan-bisect-verdict", ["nan-bisect", "{evil}", "--val-range", "inp:-1,1"], 1, "root cause:",
         _verdict_one_line),
    Case("names-nan-bisect-markdown", ["nan-bisect", "{evil}", "--val-range", "inp:-1,1", "--format", "markdown"], 1,
         "root cause", _markdown_escaped_in_full),
    Case("names-nan-bisect-html", ["nan-bisect", "{evil}", "--val-range", "inp:-1,1", "--html", "{out}/r.html"], 1,
         "root cause", _html_safe),
    Case("names-nan-bisect-junit", ["nan-bisect", "{evil}", "--val-range", "inp:-1,1", "--junit", "{out}/r.xml"], 1,
         "root cause", _junit_valid),
    Case("names-profile-csv", ["profile", "{evil}", "--runs", "2", "--format", "csv", "--val-range", "inp:1,2"], 0,
         "top kernels", _no_raw_controls),
    Case("names-unknown-pattern-error-line", ["probe", "{evil}", "-s", "re:^zz\x1b"], 2, "matches no tensor"),
    # ---- every command's early errors, as a process (issue 28) ---------------------------------
    # compare builds both sessions on background threads while it plans: an error meanwhile must
    # still end the process with its code (it aborted with status 134)
    Case("early-empty-inputs-compare", ["compare", "{big}", "{big2}", "-i", "{empty_dir}"], 3,
         "empty: no input samples found"),
    Case("early-empty-inputs-compare-q", ["-q", "compare", "{big}", "{big2}", "-i", "{empty_dir}", "--json",
                                          "{out}/r.json"], 3, "empty: no input samples found"),
    Case("early-empty-inputs-probe", ["probe", "{big}", "-i", "{empty_dir}"], 3, "empty: no input samples found"),
    Case("early-empty-inputs-nan-bisect", ["nan-bisect", "{big}", "-i", "{empty_dir}"], 3,
         "empty: no input samples found"),
    Case("early-empty-inputs-profile", ["profile", "{big}", "-i", "{empty_dir}"], 3, "empty: no input samples found"),
    Case("early-missing-inputs-compare", ["compare", "{big}", "{big2}", "-i", "{out}/nowhere"], 2, "nowhere"),
    Case("early-synthetic-over-budget-compare", ["compare", "{big}", "{big2}", "--shape", "x:99999999x2048"], 3,
         "a synthetic sample needs 762.9 GB (float32), more than the memory budget"),
    Case("early-shape-static-dim-compare", ["compare", "{big}", "{big2}", "--shape", "x:1x99999999999"], 2,
         "dimension 1 is 99999999999, but the model fixes it at 2048"),
    Case("early-shape-static-dim-nan-bisect", ["nan-bisect", "{big}", "--shape", "x:1x99999999999"], 2,
         "dimension 1 is 99999999999, but the model fixes it at 2048"),
    Case("early-shape-static-dim-profile", ["profile", "{big}", "--shape", "x:1x99999999999"], 2,
         "dimension 1 is 99999999999, but the model fixes it at 2048"),
    Case("early-unknown-input-compare", ["compare", "{big}", "{big2}", "--shape", "nosuch:1x2048"], 2, "nosuch"),
    Case("early-unknown-layer-compare", ["compare", "{m}", "{m2}", "--layers", "nosuch"], 2,
         "pattern 'nosuch' matches no tensor"),
    Case("early-unknown-tensor-probe", ["probe", "{m}", "-s", "nosuch"], 2, "pattern 'nosuch' matches no tensor"),
    Case("early-unloadable-a-compare", ["compare", "{junk}", "{big}"], 3, "junk.onnx: not a valid ONNX protobuf"),
    Case("early-unloadable-b-compare", ["compare", "{big}", "{junk}"], 3, "junk.onnx: not a valid ONNX protobuf"),
    Case("early-unloadable-probe", ["probe", "{junk}"], 3, "junk.onnx: not a valid ONNX protobuf"),
    Case("early-unloadable-nan-bisect", ["nan-bisect", "{junk}"], 3, "junk.onnx: not a valid ONNX protobuf"),
    Case("early-unloadable-profile", ["profile", "{junk}"], 3, "junk.onnx: not a valid ONNX protobuf"),
    Case("early-unloadable-inspect", ["inspect", "{junk}"], 3, "junk.onnx: not a valid ONNX protobuf"),
    Case("early-unloadable-validate", ["validate", "{junk}"], 1, "MI10"),
    Case("early-report-through-file-compare", ["compare", "{big}", "{big2}", "--json", "{ok}/r.json"], 2,
         "ok.yaml is a file, not a folder"),
    Case("early-report-through-file-probe", ["probe", "{m}", "--html", "{ok}/r.html"], 2, "ok.yaml is a file"),
    Case("early-report-through-file-nan-bisect", ["nan-bisect", "{m}", "--json", "{ok}/r.json"], 2, "ok.yaml is a file"),
    Case("early-report-through-file-profile", ["profile", "{m}", "--json", "{ok}/r.json"], 2, "ok.yaml is a file"),
    Case("early-report-through-file-validate", ["validate", "{m}", "--html", "{ok}/r.html"], 2, "ok.yaml is a file"),
    Case("early-report-through-file-inspect", ["inspect", "{m}", "--json", "{ok}/r.json"], 2, "ok.yaml is a file"),
    Case("early-report-missing-input-report", ["report", "{out}/nowhere.json"], 2, "nowhere.json"),
    # ---- zero-node model (item 15) and stderr noise (item 19) ---------------------------------
    Case("zero-node-profile", ["profile", "{zero}", "--runs", "2"], 0, "PASS"),
    Case("zero-node-probe-all", ["probe", "{zero}"], 0, "1 tensor(s) probed"),
    Case("zero-node-nan-bisect", ["nan-bisect", "{zero}"], 0, "CLEAN"),
    Case("zero-node-compare", ["compare", "{zero}", "{zero}"], 0, "PASS"),
    Case("fp16-overflow-quiet-after-config", ["-c", "{ok}", "-vq", "nan-bisect", "{fp16}", "--val-range", "x:-10,10"], 1,
         "", _quiet_stderr),
    Case("fp16-overflow-quiet-stderr", ["-q", "nan-bisect", "{fp16}", "--val-range", "x:-10,10"], 1, "",
         _quiet_stderr),
]


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Dict[str, Path]:
    return build_world(tmp_path_factory.mktemp("world"))


def _snapshot(folder: Path) -> Dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()}


@pytest.fixture(scope="module")
def runs(world: Dict[str, Path], tmp_path_factory) -> Dict[str, Tuple[Ran, Path]]:
    """Every case run once as a process (two at a time), with the world's files hashed before and after."""
    before = _snapshot(world["dir"])
    base = tmp_path_factory.mktemp("cases")

    def one(case: Case) -> Tuple[Ran, Path]:
        out = base / case.id
        out.mkdir()  # the case's working folder: probe's history and any stray output land here
        fields = {name: str(path) for name, path in world.items()} | {"out": str(out)}
        return run_mi([arg.format(**fields) for arg in case.argv], cwd=out), out

    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        done = dict(zip((c.id for c in CASES), pool.map(one, CASES)))
    done["__world_changed__"] = ({k for k in before.keys() | _snapshot(world["dir"]).keys()
                                  if before.get(k) != _snapshot(world["dir"]).get(k)}, base)  # type: ignore[assignment]
    return done


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case: Case, runs: Dict[str, Tuple[Ran, Path]]) -> None:
    ran, out = runs[case.id]
    stdout, stderr = ran.stdout, ran.stderr
    assert_status(ran, case.code)
    assert "Traceback" not in stdout + stderr and "Internal error" not in stderr
    assert "terminate called" not in stderr and "Aborted" not in stderr
    assert "\x1b" not in stdout + stderr
    if case.code in (2, 3):
        errors = [line for line in stderr.splitlines() if line.startswith("Error:")]
        assert len(errors) == 1, stderr
        assert case.message in errors[0], errors[0]
    else:
        assert case.message in stdout + stderr
    if case.check is not None:
        case.check(stdout, stderr, out)


def test_no_case_touched_the_world(runs: Dict[str, Tuple[Ran, Path]]) -> None:
    changed, _ = runs["__world_changed__"]
    assert not changed  # no model, sample or config written by any case


def test_the_matrix_has_at_least_60_cases() -> None:
    assert len(CASES) >= 60 and len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("quiet", [["-q"], []])
def test_stderr_holds_only_mi_lines_in_a_real_process(world: Dict[str, Path], tmp_path: Path, quiet) -> None:
    """onnxruntime logs to file descriptor 2 itself (invisible to CliRunner): a real process shows
    that its coloured error line is gone and only mi's `Error:` line remains."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "inspector_cli.cli", *quiet, "probe", str(world["custom"]),
                           "--history-dir", str(tmp_path / "h")], capture_output=True, text=True, cwd=tmp_path,
                          check=False)
    assert done.returncode == 3
    assert done.stderr.splitlines() == [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert len(done.stderr.splitlines()) == 1 and "is not a registered function/op" in done.stderr
