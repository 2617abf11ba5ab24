#!/usr/bin/env bash
# The first five minutes: quantise a small CNN trained on real data (scikit-learn's bundled 8x8
# digits, no download; the fp32 model ships in scripts/demo_data/) to int8 QDQ with onnxruntime, with
# one activation's range set too small, and ask mi which layer the accuracy lost and whether the
# accuracy gate holds (it does not: exit 1 from mi is the demo's point, the script exits 0).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_venv.sh
install_project '[demo]'
out=demo-out
rm -rf "$out"
.venv/bin/python scripts/demo_digits.py build "$out"
# Every layer of the int8 model against the fp32 reference on the 360 held-out digits, the own
# error (int8 layer fed fp32 inputs) of every layer, and each model's accuracy against
# the held-out labels (--labels), gated at 1.5 points of drop.
status=0
.venv/bin/mi compare "$out/digits_fp32.onnx" "$out/digits_int8.onnx" --inputs "$out/heldout" \
  --layers all --isolate all --max-memory 512M --labels "$out/heldout_labels.csv" \
  --max-accuracy-drop 0.015 --json demo-report.json --html demo-report.html || status=$?
echo "wrote demo-report.json and demo-report.html"
if [ "$status" -eq 1 ]; then
  echo "mi compare exited 1: the accuracy gate failed, as README.md explains"
elif [ "$status" -ne 0 ]; then
  exit "$status"
fi
