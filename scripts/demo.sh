#!/usr/bin/env bash
# The first five minutes: train a small CNN on real data (scikit-learn's bundled 8x8 digits, no
# download), quantise it to int8 QDQ with onnxruntime, and ask mi which layers the accuracy lost.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_venv.sh
install_project '[demo]'
out=demo-out
rm -rf "$out"
.venv/bin/python scripts/demo_digits.py build "$out"
# Every layer of the int8 model against the fp32 reference on the 360 held-out digits, the own
# error (int8 layer fed fp32 inputs) of the three worst layers, and each model's accuracy against
# the held-out labels (--labels), gated at 1.5 points of drop. Exit 0 when the gate holds.
# A fixed memory budget keeps the output identical from one machine to the next.
.venv/bin/mi compare "$out/digits_fp32.onnx" "$out/digits_int8.onnx" --inputs "$out/heldout" \
  --layers all --isolate worst:3 --max-memory 512M --labels "$out/heldout_labels.csv" \
  --max-accuracy-drop 0.015 --json demo-report.json --html demo-report.html
echo "wrote demo-report.json and demo-report.html"
