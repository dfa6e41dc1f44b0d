#!/usr/bin/env bash
# Create .venv with codemode and what it needs to run — nothing for the tests (that is
# scripts/setup.sh). Safe to run again: it only reinstalls when pyproject.toml changed.
# `bash scripts/demo.sh` runs this; so does scripts/setup.sh before adding the test tools.
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "codemode needs Python 3.11 or newer (set PYTHON=/path/to/python3.11)" >&2
  exit 1
fi

# The sandbox confines commands with bubblewrap (and seccomp through libseccomp). Install
# them where we can; without them the sandbox falls back to Landlock, or refuses to run
# commands in a restricted mode. Never fails the setup.
need=()
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so' || need+=(libseccomp2)
if [ ${#need[@]} -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  # under the lock scripts/setup-local-model.sh's apt-get takes too (setup.sh runs both
  # at once; apt-get fails at once on a lock another holds)
  if ! flock "${TMPDIR:-/tmp}/codemode-setup-apt.lock" bash -c '
         apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
           apt-get install -y -qq --no-install-recommends "$@"' apt "${need[@]}" \
       >/dev/null 2>&1; then
    echo "setup: could not install ${need[*]} (the sandbox falls back to Landlock)" >&2
  fi
fi

stamp=.venv/.codemode-runtime
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
[ "$(cat "$stamp" 2>/dev/null)" = "$want" ] && [ -x .venv/bin/interpreter ] && exit 0
# --with-test-tools (scripts/setup.sh): the `test` extra too, in the same install (one
# resolution and one download of what both need); scripts/setup-test-tools.sh then has
# nothing left to do.
extras=agent
[ "${1:-}" = --with-test-tools ] && extras=agent,test

# Quick where it can be: a venv without its own pip (~3 s saved) that the host's pip
# fills; the dependencies and setuptools first, then codemode itself built in place
# without an isolated build environment (~4 s saved); no .pyc compiled by the installers
# (the modules a session imports are compiled once at the end).
log=.venv/install.log
mkdir -p .venv
if [ ! -x .venv/bin/python ] && "$python" -m pip --version >/dev/null 2>&1; then
  "$python" -m venv --without-pip .venv
fi
[ -x .venv/bin/python ] || "$python" -m venv .venv
# uv installs the same packages in ~3 s instead of ~12 s. The one on PATH, else one
# fetched once (~4 s) into a cache outside the clone, keyed by its version; without it
# (CODEMODE_NO_UV=1, or no way to fetch it) pip does the work.
uv_version=0.13.8
uv_dir=${XDG_CACHE_HOME:-$HOME/.cache}/codemode/uv-$uv_version
uv=$(command -v uv 2>/dev/null || true)
if [ -z "$uv" ] && [ -z "${CODEMODE_NO_UV:-}" ]; then
  if [ ! -x "$uv_dir/bin/uv" ] && "$python" -m pip --version >/dev/null 2>&1; then
    "$python" -m pip install -q --disable-pip-version-check --target "$uv_dir" \
      "uv==$uv_version" >/dev/null 2>&1 || rm -rf "$uv_dir"
  fi
  [ -x "$uv_dir/bin/uv" ] && uv=$uv_dir/bin/uv
fi
[ -n "${CODEMODE_NO_UV:-}" ] && uv=
# scripts/setup-test-tools.sh installs with the same one.
echo "$uv" > .venv/.uv
if .venv/bin/python -m pip --version >/dev/null 2>&1; then
  install=(.venv/bin/python -m pip install -q --disable-pip-version-check --no-compile)
else
  install=("$python" -m pip --python .venv/bin/python install -q --disable-pip-version-check
           --no-compile)
fi
# Everything: the lean install's dependencies and the `agent` extra's (the full install;
# with --with-test-tools the `test` extra's too), its own `codemode[...]` references
# followed.
mapfile -t deps < <("$python" scripts/requirements.py --build "$extras")
# A path-file editable install: the import-hook kind costs ~7 ms at every start.
fill() {
  "$@" "${deps[@]}" \
    && "$@" --no-deps --no-build-isolation -e . --config-settings editable_mode=compat
}
# uv first where there is one; pip if uv fails (an index only pip is configured for).
if ! { { [ -n "$uv" ] && fill "$uv" pip install -q --python .venv/bin/python; } \
       || fill "${install[@]}"; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "setup: installing codemode failed (log above, also in $log)" >&2
  exit 1
fi
.venv/bin/python -c 'import codemode, quickjs, py_mini_racer' \
  || { echo "setup: installing codemode failed" >&2; exit 1; }
# Bytecode for codemode, every module it imports and the libraries its commands import
# on first use (httpx, anyio's event-loop backend, prompt_toolkit...), written now (~3 s
# of CPU): the installs above compile nothing ahead, and where PYTHONDONTWRITEBYTECODE is
# set (CI machines, containers, this project's own) Python would otherwise compile them
# again at every start: about 150 ms of CPU more per `interpreter exec`, and ~350 ms
# more before an interactive session's first request. Never fails the setup.
env -u PYTHONDONTWRITEBYTECODE .venv/bin/python -c '
from codemode.launch.serve import import_everything
import_everything()
' >/dev/null 2>&1 || echo "setup: could not compile the bytecode ahead (starts are slower)" >&2
echo "$want" > "$stamp"
[ "$extras" = agent,test ] && echo "$want" > .venv/.codemode-installed
exit 0
