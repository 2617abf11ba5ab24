"""Fixtures of the remedy tests: the broken QDQ pair is built and quantised once per session."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List

import numpy as np
import onnx
import pytest

from .models import break_input_scale, cnn_fp32, image_samples, quantize_qdq


@pytest.fixture(scope="session")
def broken_pair(tmp_path_factory) -> Dict[str, object]:
    """fp32 CNN; its QDQ quantisation (per-tensor weights, so conv3's outlier channel hurts) with the
    input quantiser of conv1 given a scale 25x too small (saturation); 12 evaluation samples."""
    folder: Path = tmp_path_factory.mktemp("remedy")
    fp32 = cnn_fp32()
    onnx.save(fp32, folder / "fp32.onnx")
    calibration = image_samples(16, seed=1)
    quantize_qdq(folder / "fp32.onnx", folder / "int8.onnx", calibration)
    broken = break_input_scale(onnx.load(folder / "int8.onnx"), "x", 1 / 25)
    onnx.save(broken, folder / "broken.onnx")
    samples: List[Dict[str, np.ndarray]] = image_samples(12, seed=5)
    return {"folder": folder, "fp32": fp32, "broken": broken, "samples": samples, "calibration": calibration}
