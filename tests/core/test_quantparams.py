"""The one dequantisation (core/quantparams.py): values, precision, per-channel broadcasting."""
from __future__ import annotations

import numpy as np
import pytest

from inspector_cli.core.quantparams import dequantize
from inspector_cli.validate.weights import sqnr_db


def test_per_tensor_values_are_exact():
    q = np.array([-128, -1, 0, 5, 127], np.int8)
    out = dequantize(q, np.array(0.5, np.float32), np.array(3, np.int8))
    assert out.dtype == np.float32
    assert out.tolist() == [-65.5, -2.0, -1.5, 1.0, 62.0]


def test_per_channel_broadcasts_along_the_axis():
    q = np.array([[10, 20], [10, 20], [10, 20]], np.uint8)  # 3 channels on axis 0
    out = dequantize(q, np.array([1.0, 0.5, 0.25], np.float32), np.array([0, 10, 20], np.uint8), axis=0)
    assert out.tolist() == [[10.0, 20.0], [0.0, 5.0], [-2.5, 0.0]]
    last = dequantize(q.T, np.array([1.0, 0.5, 0.25], np.float32), None, axis=-1)
    assert last.tolist() == [[10.0, 5.0, 2.5], [20.0, 10.0, 5.0]]


def test_float32_moves_an_int8_sqnr_by_less_than_a_thousandth_of_a_db():
    rng = np.random.default_rng(0)
    weights = rng.normal(0, 0.1, 4096).astype(np.float32)
    scale = np.float32(np.abs(weights).max() / 127)
    q = np.clip(np.round(weights / scale), -127, 127).astype(np.int8)
    exact = q.astype(np.float64) * np.float64(scale)
    assert abs(sqnr_db(weights, dequantize(q, np.array(scale), None)) - sqnr_db(weights, exact)) < 1e-3


def test_reuses_the_output_buffer():
    q = np.arange(6, dtype=np.int8).reshape(2, 3)
    buffer = np.empty((2, 3), np.float32)
    assert dequantize(q, np.array(2.0, np.float32), None, out=buffer) is buffer
    assert buffer.tolist() == [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]


def test_the_one_varint_reader():
    from inspector_cli.core.protoutil import read_varint

    assert read_varint(b"\x96\x01rest", 0) == (150, 2)
    assert read_varint(b"\x00\xac\x02", 1) == (300, 3)
    with pytest.raises(EOFError):
        read_varint(b"\x96\x01", 0, end=1)
    with pytest.raises(ValueError):
        read_varint(b"\xff" * 11, 0)


def test_describe_error_is_one_line_for_users_and_for_bugs():
    from inspector_cli.errors import EXIT_INTERNAL, InputDataError, describe_error

    assert describe_error(InputDataError("data/x.npz: no tensor 'x'")) == (3, "data/x.npz: no tensor 'x'")
    code, line = describe_error(ZeroDivisionError("division by zero\nmore"))
    assert code == EXIT_INTERNAL and line == ("internal error: ZeroDivisionError: division by zero (this is a bug in mi; "
                                              "rerun with --debug for the traceback)")
