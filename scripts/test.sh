#!/usr/bin/env bash
# Quick start, part two: set up, lint, check imports and types, run the whole test suite.
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
if [ -n "$build_pid" ] && kill -0 "$build_pid" 2>/dev/null; then
  export CODEMODE_LOCAL_MODEL_BUILD_PID=$build_pid
  trap 'kill -- -"$build_pid" 2>/dev/null || true' EXIT
fi
.venv/bin/ruff check codemode codemode_testkit tests examples benchmarks
# Import layers and cycles ([tool.importlinter] in pyproject.toml), then the type check.
.venv/bin/lint-imports --no-cache
.venv/bin/mypy
# One pytest worker a core (pytest-xdist), each taking whole test files (module
# fixtures, such as a local model server, start once): most tests wait on the processes
# they start. CODEMODE_TEST_WORKERS=0 runs the suite in one process.
# Bytecode written even where PYTHONDONTWRITEBYTECODE is set (CI, containers): each
# worker then reads the tests' rewritten modules back instead of rewriting them (the
# collection: 12 CPU-s a worker, 6 once written by an earlier run).
env -u PYTHONDONTWRITEBYTECODE \
  .venv/bin/python -m pytest -q -n "${CODEMODE_TEST_WORKERS:-$(nproc)}" --dist loadfile "$@"
