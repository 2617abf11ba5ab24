# Sourced by demo.sh and test.sh: create .venv if needed and install the project into it.
# Usage: install_project [EXTRAS]   e.g. install_project '[dev]'
install_project() {
  local python=${PYTHON:-python3}
  if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
  fi
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e ".${1:-}"
}
