# Sourced by demo.sh and test.sh: create .venv if needed and install the project into it.
# Usage: install_project [EXTRAS]   e.g. install_project '[dev]'
#
# The install is editable, so code changes need no reinstall: pip runs again only when
# pyproject.toml or the extras changed (a stamp in .venv records what was installed). pip's and the
# build backend's chatter goes to .venv/install.log, shown only when the install fails.
install_project() {
  local python=${PYTHON:-python3}
  local extras=${1:-}
  local stamp=.venv/.mi-installed
  local want
  want="$(cat pyproject.toml; echo "extras=$extras")"
  want=$(printf '%s' "$want" | "$python" -c 'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())')
  if [ -x .venv/bin/python ] && [ -f "$stamp" ] && grep -qx "$want" "$stamp"; then
    return 0
  fi
  if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
  fi
  echo "installing mi${extras} into .venv (the first time takes a few minutes; log: .venv/install.log)" >&2
  if ! { .venv/bin/python -m pip install --quiet --upgrade pip \
         && .venv/bin/python -m pip install --quiet -e ".${extras}"; } > .venv/install.log 2>&1; then
    tail -n 30 .venv/install.log >&2
    echo "Error: installing mi${extras} into .venv failed (full log: .venv/install.log)" >&2
    return 1
  fi
  # several extras may be installed side by side (test.sh: [dev], demo.sh: [demo]): keep every stamp
  echo "$want" >> "$stamp"
}
