#!/usr/bin/env bash
# Install mi with its dev extras into .venv and run the whole test suite (CI runs exactly this).
# In CI (CI=true) or with MI_PROVIDER_TESTS=1, the execution-provider tests then run in a second
# venv where onnxruntime-openvino replaces the CPU build (scripts/test_providers.sh, docs/providers.md).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_venv.sh
install_project '[dev]'
# Two workers (CI's machine has 2 cores); a test file runs on one worker, and tests that share the zoo or
# the Ray instance stay on one worker (tests/conftest.py). MI_TEST_WORKERS=0 runs in one process.
status=0
.venv/bin/python -m pytest -n "${MI_TEST_WORKERS:-2}" "$@" || status=$?
if [ "$status" = 0 ] && { [ "${CI:-}" = "true" ] || [ "${MI_PROVIDER_TESTS:-}" = "1" ]; } && [ "$#" = 0 ]; then
  bash scripts/test_providers.sh || status=$?
fi
exit "$status"
