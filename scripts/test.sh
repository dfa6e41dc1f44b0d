#!/usr/bin/env bash
# Quick start, part two: set up, lint, check imports and types, run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check codemode tests examples benchmarks
# Import layers and cycles ([tool.importlinter] in pyproject.toml), then the type check.
.venv/bin/lint-imports --no-cache
.venv/bin/mypy
.venv/bin/python -m pytest -q "$@"
