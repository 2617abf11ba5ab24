#!/usr/bin/env bash
# The provider tests (pytest -m providers) on real execution providers, in two venvs beside .venv:
#   .venv-ep  the stock onnxruntime wheel with the plugin providers users install beside it
#             (onnxruntime-ep-openvino, onnxruntime-qnn): every provider test;
#   .venv-ov  the replacement build onnxruntime-openvino (the old way; it installs the `onnxruntime`
#             package itself, so the project goes in with --no-deps and its other dependencies by name):
#             the OpenVINO tests only, which assert the replacement build's own partitions.
# OpenVINO's plugin offers Intel devices only; on another CPU the tests build tests/providers/
# ov_vendor_shim.c with the system's C compiler (tests/providers/routes.py). MI_LEGACY_PROVIDER=0
# leaves the replacement build out.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
deps=("click>=8.1" "onnx>=1.16" "ml_dtypes>=0.5,<0.7" "numpy>=1.24" "rich>=13" "pyyaml>=6" "tabulate>=0.9"
      "jinja2>=3.1" "pillow>=9.1" "pytest>=8" "hypothesis>=6.100" "jsonschema>=4.20")
want=$(cat pyproject.toml "$0" | "$python" -c 'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())')

# make_venv VENV WHAT PIP-ARGS...: (re)install when pyproject.toml or this script changed
make_venv() {
  local venv=$1 what=$2; shift 2
  local stamp=$venv/.mi-installed
  if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && grep -qx "$want" "$stamp"; then
    return 0
  fi
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  echo "installing mi with $what into $venv (log: $venv/install.log)" >&2
  if ! { "$venv/bin/python" -m pip install --quiet --upgrade pip && "$@"; } > "$venv/install.log" 2>&1; then
    tail -n 30 "$venv/install.log" >&2
    echo "Error: installing $what into $venv failed (full log: $venv/install.log)" >&2
    exit 1
  fi
  echo "$want" > "$stamp"
}

install_plugins() {
  .venv-ep/bin/python -m pip install --quiet "onnxruntime>=1.23" "onnxruntime-ep-openvino>=1.8" "onnxruntime-qnn>=2.7" \
    && .venv-ep/bin/python -m pip install --quiet --no-deps -e . && .venv-ep/bin/python -m pip install --quiet "${deps[@]}"
}

install_legacy() {
  .venv-ov/bin/python -m pip uninstall --quiet -y onnxruntime \
    && .venv-ov/bin/python -m pip install --quiet "onnxruntime-openvino>=1.24" \
    && .venv-ov/bin/python -m pip install --quiet --no-deps -e . && .venv-ov/bin/python -m pip install --quiet "${deps[@]}"
}

make_venv .venv-ep "the stock onnxruntime and plugin providers" install_plugins
status=0
.venv-ep/bin/python -m pytest -m providers -p no:cacheprovider -q "$@" tests/providers || status=$?
if [ "${MI_LEGACY_PROVIDER:-1}" != "0" ]; then
  make_venv .venv-ov "onnxruntime-openvino (the replacement build)" install_legacy
  .venv-ov/bin/python -c 'import onnxruntime as o, sys; sys.exit(0 if "OpenVINOExecutionProvider" in o.get_available_providers() else "onnxruntime-openvino has no OpenVINOExecutionProvider here")'
  .venv-ov/bin/python -m pytest -m providers -p no:cacheprovider -q "$@" tests/providers/test_openvino.py || status=$?
fi
exit "$status"
