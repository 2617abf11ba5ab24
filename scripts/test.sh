#!/usr/bin/env bash
# Install mi with its dev extras into .venv and run the whole test suite (CI runs exactly this).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_venv.sh
install_project '[dev]'
# Two workers (CI's machine has 2 cores); a test file runs on one worker, and tests that share the zoo or
# the Ray instance stay on one worker (tests/conftest.py). MI_TEST_WORKERS=0 runs in one process.
exec .venv/bin/python -m pytest -n "${MI_TEST_WORKERS:-2}" "$@"
