#!/usr/bin/env bash
# Quick start, part two: set up, lint, and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check codemode tests examples benchmarks
.venv/bin/python -m pytest -q "$@"
