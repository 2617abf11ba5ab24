"""The fixed cost of the commands a CI gate runs most (issue 16): what an outputs-only `mi compare`
and a `-q --json` probe must not import, and the lazily imported result sections still decode."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import List

import numpy as np
import pytest

from .fixtures.helpers import affine_model, invoke, save, save_npz

# Imported only where they are used: the layer/scope/remedy result sections (~25 dataclasses), the
# terminal renderers (nothing is drawn under -q), onnx (the plan comes from the files' headers), and
# stdlib modules the run can do without (concurrent.futures and its logging, tempfile and random).
NOT_FOR_OUTPUTS_ONLY = ("inspector_cli.results.layers", "inspector_cli.results.remedy",
                        "inspector_cli.results.scope_section", "inspector_cli.results.inspect",
                        "inspector_cli.results.scopes", "inspector_cli.render.compare_view",
                        "inspector_cli.render.table", "inspector_cli.commands.profile", "onnx", "ml_dtypes",
                        "concurrent.futures", "tempfile", "random")


def _imported_after(argv: List[str], watch: tuple) -> List[str]:
    """Run `mi ARGV` in a fresh interpreter; the modules of `watch` it imported (exit code must be 0)."""
    code = ("import sys\nfrom inspector_cli.cli import main\n"
            f"sys.argv = ['mi', *{argv!r}]\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert e.code == 0, e.code\n"
            f"print(sorted(m for m in {watch!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1].replace("'", '"'))


def _pair(tmp_path: Path) -> List[str]:
    a = save(affine_model(2.0, 1.0, shape=("N", 4)), tmp_path / "a.onnx")
    b = save(affine_model(2.01, 1.0, shape=("N", 4)), tmp_path / "b.onnx")
    rng = np.random.default_rng(0)
    data = save_npz(tmp_path / "data", [{"x": rng.normal(size=(2, 4)).astype(np.float32)} for _ in range(3)])
    return [str(a), str(b), "--inputs", str(data)]


def test_outputs_only_compare_imports_no_section_renderer_or_onnx(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    imported = _imported_after(["-q", "compare", *_pair(tmp_path), "--json", str(out)], NOT_FOR_OUTPUTS_ONLY)
    assert imported == []
    document = json.loads(out.read_text())
    assert document["verdict"]["exit_code"] == 0 and document["results"]["layers"] is None
    assert len(document["models"][0]["sha256"]) == 64  # the hash the JSON needs is still there


def test_a_table_is_still_drawn_without_quiet(tmp_path: Path) -> None:
    result = invoke(["compare", *_pair(tmp_path)])
    assert "cosine" in result.output and "PASS: 1 output(s) compared over 3 sample(s)" in result.output


def test_a_layer_result_decodes_in_a_process_that_never_imported_its_sections(tmp_path: Path) -> None:
    """results.compare names LayerSection/ScopeSection/RemedySection lazily (PEP 562); decoding a saved
    --layers result resolves them through the module (codec.type_hints) and gives the same document."""
    out = tmp_path / "layers.json"
    invoke(["-q", "compare", *_pair(tmp_path), "--layers", "all", "--json", out])
    code = ("import json, sys\nfrom inspector_cli.serialize import result_from_document, result_to_json\n"
            "assert 'inspector_cli.results.layers' not in sys.modules\n"
            f"document = json.loads(open({str(out)!r}).read())\n"
            "result = result_from_document(document)\n"
            "print(type(result.layers).__name__, type(result.scopes).__name__, len(result.layers.layers))\n"
            "again = json.loads(result_to_json(result)); again.pop('created'); document.pop('created')\n"
            "print(again == document)")
    lines = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True).stdout.split("\n")
    kinds, same = lines[0].split(), lines[1]
    assert kinds[:2] == ["LayerSection", "ScopeSection"] and int(kinds[2]) >= 1
    assert same == "True"


def test_an_unknown_name_in_a_result_annotation_still_fails_loudly() -> None:
    import dataclasses
    import types

    from inspector_cli.results.codec import type_hints

    module = types.ModuleType("mi_test_lazy_names")
    module.__dict__["__getattr__"] = lambda name: (_ for _ in ()).throw(AttributeError(name))
    sys.modules[module.__name__] = module
    try:
        cls = dataclasses.make_dataclass("Broken", [("x", "Missing")])
        cls.__module__ = module.__name__
        with pytest.raises(NameError, match="Missing"):
            type_hints(cls)
    finally:
        del sys.modules[module.__name__]


def test_reports_are_written_atomically_with_a_fresh_private_name(tmp_path: Path) -> None:
    from inspector_cli.serialize import _mkstemp, write_atomic

    fd, name = _mkstemp(tmp_path, ".r.json.", ".tmp")
    try:
        assert Path(name).parent == tmp_path and Path(name).name.startswith(".r.json.")
        assert (os.stat(name).st_mode & 0o777) == 0o600
    finally:
        os.close(fd)
        os.unlink(name)
    write_atomic(tmp_path / "r.json", "{}\n")
    assert (tmp_path / "r.json").read_text() == "{}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]  # no temporary file left behind
