#!/usr/bin/env bash
# Quick start, part two: set up, then lint, check imports and types beside the whole
# test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
# The real llama.cpp servers (scripts/setup-local-model.sh) take minutes to compile on a
# fresh machine: that build runs in the background, beside the lint and the suite, and
# the tests that need a server start as soon as it is built, or wait for it when nothing
# else is left (codemode_testkit/local_model.py, tests/xdist_order.py).
# Once built it is cached by version and this costs nothing.
export CODEMODE_LOCAL_MODEL_BACKGROUND=1
bash scripts/setup.sh
build_pid=$(cat .venv/.local-model-build.pid 2>/dev/null || true)
lint_pid=
stop() {
  [ -z "$build_pid" ] || kill -- -"$build_pid" 2>/dev/null || true
  [ -z "$lint_pid" ] || kill -- -"$lint_pid" 2>/dev/null || true
}
trap stop EXIT
if [ -n "$build_pid" ] && kill -0 "$build_pid" 2>/dev/null; then
  export CODEMODE_LOCAL_MODEL_BUILD_PID=$build_pid
else
  build_pid=
fi
# The lint, the import-layer contracts ([tool.importlinter] in pyproject.toml) and the
# type check run beside the suite, niced (its workers leave most of a core idle, waiting
# on the processes they start; these ~30 CPU-s fill it). Their output comes at once when
# one fails, else after the suite; the command fails when any of them failed. (Bytecode
# written: the test tools are installed without it, see below.)
lint_log=$(mktemp "${TMPDIR:-/tmp}/codemode-lint.XXXXXX")
setsid nice -n 10 env -u PYTHONDONTWRITEBYTECODE bash -c '
  { .venv/bin/ruff check codemode codemode_testkit tests examples benchmarks \
      && .venv/bin/lint-imports --no-cache \
      && .venv/bin/mypy; } >"$1" 2>&1 && exit 0
  { echo; echo "--- test.sh: the lint, import or type check failed:"; cat "$1"; } >&2
  exit 1
' lint "$lint_log" </dev/null &
lint_pid=$!
# One pytest worker a core (pytest-xdist), each taking whole test files (module
# fixtures, such as a local model server, start once): most tests wait on the processes
# they start. CODEMODE_TEST_WORKERS=0 runs the suite in one process.
# Bytecode written even where PYTHONDONTWRITEBYTECODE is set (CI, containers): each
# worker then reads the tests' rewritten modules back instead of rewriting them (the
# collection: 12 CPU-s a worker, 6 once written by an earlier run).
suite=0
env -u PYTHONDONTWRITEBYTECODE \
  .venv/bin/python -m pytest -q -n "${CODEMODE_TEST_WORKERS:-$(nproc)}" --dist loadfile "$@" \
  || suite=$?
lint=0
wait "$lint_pid" || lint=$?
lint_pid=
if [ "$lint" = 0 ]; then
  echo "--- ruff, lint-imports, mypy:"
  cat "$lint_log"
fi
rm -f "$lint_log"
if [ "$lint" != 0 ]; then
  echo "test.sh: the lint, import or type check failed (its output is above)" >&2
  exit 1
fi
exit "$suite"
