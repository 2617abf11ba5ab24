#!/usr/bin/env bash
# The provider tests (pytest -m providers) on a real execution provider: a second venv, .venv-ov,
# where onnxruntime-openvino replaces onnxruntime's CPU wheel (both install the `onnxruntime`
# package, so the project goes in with --no-deps and its other dependencies by name).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
venv=.venv-ov
stamp=$venv/.mi-ov-installed
want=$(cat pyproject.toml "$0" | "$python" -c 'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())')
if ! { [ -x $venv/bin/python ] && [ -f $stamp ] && grep -qx "$want" $stamp; }; then
  [ -x $venv/bin/python ] || "$python" -m venv $venv
  echo "installing mi with onnxruntime-openvino into $venv (log: $venv/install.log)" >&2
  if ! { $venv/bin/python -m pip install --quiet --upgrade pip \
         && $venv/bin/python -m pip uninstall --quiet -y onnxruntime \
         && $venv/bin/python -m pip install --quiet "onnxruntime-openvino>=1.24" \
         && $venv/bin/python -m pip install --quiet --no-deps -e . \
         && $venv/bin/python -m pip install --quiet "click>=8.1" "onnx>=1.16" "ml_dtypes>=0.5,<0.7" "numpy>=1.24" "rich>=13" "pyyaml>=6" \
              "tabulate>=0.9" "jinja2>=3.1" "pillow>=9.1" "pytest>=8" "hypothesis>=6.100" "jsonschema>=4.20"; \
       } > $venv/install.log 2>&1; then
    tail -n 30 $venv/install.log >&2
    echo "Error: installing onnxruntime-openvino into $venv failed (full log: $venv/install.log)" >&2
    exit 1
  fi
  echo "$want" > $stamp
fi
$venv/bin/python -c 'import onnxruntime as o, sys; sys.exit(0 if "OpenVINOExecutionProvider" in o.get_available_providers() else "onnxruntime-openvino has no OpenVINOExecutionProvider here")'
exec $venv/bin/python -m pytest -m providers -p no:cacheprovider -q "$@" tests/providers
