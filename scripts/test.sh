#!/usr/bin/env bash
# Install mi with its dev extras into .venv and run the whole test suite (CI runs exactly this).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[dev]'
exec .venv/bin/python -m pytest "$@"
