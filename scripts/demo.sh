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
# Accuracy on the held-out labels (mi compare measures agreement between the two models, not accuracy).
.venv/bin/python scripts/demo_digits.py accuracy "$out"
# Every layer of the int8 model against the fp32 reference on the 360 held-out digits, and the own
# error (int8 layer fed fp32 inputs) of the three worst layers. Exit 0: no gates are set here.
# A fixed memory budget keeps the output identical from one machine to the next.
.venv/bin/mi compare "$out/digits_fp32.onnx" "$out/digits_int8.onnx" --inputs "$out/heldout" \
  --layers all --isolate worst:3 --max-memory 512M --json demo-report.json --html demo-report.html
echo "wrote demo-report.json and demo-report.html"
