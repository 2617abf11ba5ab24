#!/usr/bin/env bash
# Install mi into .venv, build a real fp32 CNN and its int8 QDQ quantisation, and compare them.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_venv.sh
install_project
.venv/bin/python scripts/make_demo_models.py demo-out
# Gates a classifier usually ships with (the demo pair passes them), layer by layer, with the
# own-versus-inherited error of the three worst layers.
.venv/bin/mi compare demo-out/model_fp32.onnx demo-out/model_int8.onnx --inputs demo-out/data \
  --min-cosine 0.98 --min-top1 0.9 --min-top5 0.8 --layers all --isolate worst:3 \
  --json demo-report.json --html demo-report.html
echo "wrote demo-report.json and demo-report.html"
