"""Synthetic samples: the size check before allocating, and chunked drawing in the target dtype
that gives exactly the values of one whole-array draw (so seeds stay reproducible)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T

from inspector_cli.core.synthetic import SyntheticSpec, generate_sample
from inspector_cli.core.types import TensorInfo
from inspector_cli.errors import InputDataError

SPECS = (TensorInfo("a", T.FLOAT, (3, 1 << 19)), TensorInfo("b", T.INT64, (1000, 1100)), TensorInfo("c", T.BOOL, (7,)),
         TensorInfo("d", T.FLOAT16, (5, 5)), TensorInfo("e", T.UINT8, (2_100_000,)))


def test_chunked_draws_equal_one_whole_draw_cast_afterwards() -> None:
    spec = SyntheticSpec(count=1, seed=3, specs=SPECS, val_ranges=(("e", 0, 255),))
    new = generate_sample(spec, 1)
    rng = np.random.default_rng([3, 1])
    for tensor in SPECS:  # the previous implementation: float64/int64 draw of the whole array, then a cast
        lo, hi = spec.range_for(tensor.name, tensor.numpy_dtype)
        if tensor.numpy_dtype == np.bool_:
            old = rng.integers(0, 2, size=tensor.shape).astype(np.bool_)
        elif np.issubdtype(tensor.numpy_dtype, np.integer):
            old = rng.integers(int(lo), int(hi), size=tensor.shape, endpoint=True).astype(tensor.numpy_dtype)
        else:
            old = rng.uniform(lo, hi, size=tensor.shape).astype(tensor.numpy_dtype)
        assert new[tensor.name].dtype == old.dtype and np.array_equal(new[tensor.name], old), tensor.name


def test_a_sample_beyond_the_budget_is_refused_before_allocating() -> None:
    spec = SyntheticSpec(specs=(TensorInfo("x", T.FLOAT, (1, 3, 224, 224)),))
    spec.check_memory(spec.specs, budget=1 * 3 * 224 * 224 * 4)  # exactly fits
    with pytest.raises(InputDataError) as caught:
        spec.check_memory(spec.specs, budget=1 * 3 * 224 * 224 * 4 - 1)
    assert str(caught.value) == ("input 'x' [1, 3, 224, 224]: a synthetic sample needs 588.0 KB (float32), more than "
                                 "the memory budget of 588.0 KB (give a smaller shape, e.g. --shape x:1x3x1x224)")
