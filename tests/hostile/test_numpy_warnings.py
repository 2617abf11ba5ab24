"""Issue 15 item 19 at the source: numpy's warnings on expected non-finite arithmetic are silenced
where they arise (np.errstate), not only at the CLI boundary, so a library caller with warnings
turned into errors gets the same answer as `mi -q` and nothing on stderr."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

from inspector_cli.core.synthetic import SyntheticSpec
from inspector_cli.nanbisect.config import NanBisectConfig
from inspector_cli.nanbisect.values import is_bad, nonfinite_counts
from inspector_cli.workflows.nan_bisect import nan_bisect

from ..fixtures.helpers import init, make_model, save, vi

H = TensorProto.FLOAT16


def _fp16_overflow(tmp_path: Path) -> Path:
    """x * 60000 in fp16: +Inf and -Inf in the same tensor (their float64 sum is NaN)."""
    nodes = [helper.make_node("Mul", ["x", "big"], ["m"], name="mul"), helper.make_node("Relu", ["m"], ["y"], name="relu"),
             helper.make_node("Neg", ["m"], ["z"], name="neg")]
    return save(make_model(nodes, [vi("x", [1, 64], H)], [vi("y", [1, 64], H), vi("z", [1, 64], H)],
                           [init("big", np.array(60000, np.float16))]), tmp_path / "fp16.onnx")


def test_is_bad_on_plus_and_minus_inf_does_not_warn() -> None:
    array = np.array([np.inf, -np.inf, 1.0], np.float16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert is_bad(array) and nonfinite_counts(array) == {"nan": 0, "inf": 2}


@pytest.mark.parametrize("options", [{}, {"all_origins": True}, {"deep": True}, {"simulate": "fp16"}],
                         ids=["layered", "all", "deep", "simulate"])
def test_nan_bisect_on_fp16_overflow_raises_no_numpy_warning(tmp_path: Path, options) -> None:
    config = NanBisectConfig(synthetic=SyntheticSpec(val_ranges=(("x", -10.0, 10.0),)), **options)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning would turn the sample into an error record
        result = nan_bisect(str(_fp16_overflow(tmp_path)), config)
    assert (result.errors, result.nonfinite) == (0, 1)
    assert result.records[0].origin.node == "mul"
