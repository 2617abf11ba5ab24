#!/usr/bin/env python3
"""Build the demo's model pair: a ResNet-style fp32 CNN and its int8 QDQ quantisation, plus samples.

    python scripts/make_demo_models.py OUT_DIR
"""
from __future__ import annotations

import sys
from pathlib import Path

from inspector_cli.testing.models import build_pair, image_samples, save_samples


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "demo-out")
    fp32, int8 = build_pair(out, softmax=False, channels=(16, 32, 64), blocks=2, image=64, calibration_count=32)
    save_samples(image_samples(16, shape=(1, 3, 64, 64), seed=7), out / "data")
    print(f"built {fp32} and {int8}, 16 samples in {out / 'data'}")


if __name__ == "__main__":
    main()
