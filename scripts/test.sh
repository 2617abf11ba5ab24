#!/usr/bin/env bash
# Install mi with its dev extras into .venv and run the whole test suite (CI runs exactly this).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_venv.sh
install_project '[dev]'
exec .venv/bin/python -m pytest "$@"
