"""Byte-flipped and cut copies of a real int8 model: every one gives a result (findings), never a crash."""
from __future__ import annotations

import random

from inspector_cli.errors import MiError
from inspector_cli.workflows.validate import validate_model


def test_mutated_models_never_crash(cnn_pair, tmp_path):
    source = cnn_pair[1].read_bytes()
    rng = random.Random(20261130)
    rules = set()
    for i in range(60):
        data = bytearray(source)
        for _ in range(rng.choice([1, 2, 5, 20])):
            data[rng.randrange(len(data))] = rng.randrange(256)
        if rng.random() < 0.2:
            data = data[: rng.randrange(len(data))]
        path = tmp_path / f"m{i}.onnx"
        path.write_bytes(bytes(data))
        try:
            result = validate_model(path)
        except MiError:  # none expected, but a one-line error would still be acceptable behaviour
            continue
        rules.update(f.rule for f in result.findings)
    # the mutations reach several families: the file level, the checker, and beyond
    assert {"MI104"} <= rules and any(r.startswith("MI2") for r in rules)
