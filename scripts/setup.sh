#!/usr/bin/env bash
# Create .venv and install codemode with its test tools. Safe to run again: it only
# reinstalls when pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "codemode needs Python 3.11 or newer (set PYTHON=/path/to/python3.11)" >&2
  exit 1
fi
[ -x .venv/bin/python ] || "$python" -m venv .venv

stamp=.venv/.codemode-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
  .venv/bin/python -m pip install --quiet -e '.[test]' 2>&1 | grep -v '^WARNING: Location' || true
  .venv/bin/python -c 'import codemode, quickjs, py_mini_racer, pytest' \
    || { echo "setup: installing codemode failed" >&2; exit 1; }
  echo "$want" > "$stamp"
fi
