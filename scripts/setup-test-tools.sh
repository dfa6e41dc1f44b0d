#!/usr/bin/env bash
# The test tools into .venv (the `test` extra of pyproject.toml: pytest, ruff, mypy,
# Ray for the batch test, ...), beside what scripts/setup-runtime.sh installed, which
# is not installed again. scripts/setup.sh runs this beside its npm downloads. Safe to
# run again: it only installs when pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
stamp=.venv/.codemode-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
[ "$(cat "$stamp" 2>/dev/null)" = "$want" ] && exit 0

log=.venv/install-test.log
# The test extra's requirements with its own `codemode[...]` references followed (those
# are the runtime's, already there: the installer finds them satisfied).
mapfile -t deps < <("$python" scripts/requirements.py test)
# uv where scripts/setup-runtime.sh found or fetched one (~4x quicker than pip); pip if
# there is none or it fails (an index only pip is configured for).
uv=$(cat .venv/.uv 2>/dev/null || true)
if .venv/bin/python -m pip --version >/dev/null 2>&1; then
  pip=(.venv/bin/python -m pip install -q --disable-pip-version-check --no-compile)
else
  pip=("$python" -m pip --python .venv/bin/python install -q --disable-pip-version-check
       --no-compile)
fi
if ! { { [ -n "$uv" ] && [ -x "$uv" ] \
         && "$uv" pip install -q --python .venv/bin/python "${deps[@]}"; } \
       || "${pip[@]}" "${deps[@]}"; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "setup: installing the test tools failed (log above, also in $log)" >&2
  exit 1
fi
.venv/bin/python -c 'import codemode, quickjs, py_mini_racer, pytest, xdist' \
  || { echo "setup: installing the test tools failed" >&2; exit 1; }
echo "$want" > "$stamp"
