#!/usr/bin/env bash
# Quick start, part one: set up, then run two batch refactors on a copy of the bundled
# sample repository and show what they changed. No model and no API key involved.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r examples/sample-repo "$work/repo"
git -C "$work/repo" init -q
git -C "$work/repo" -c user.name=demo -c user.email=demo@example.invalid add -A
git -C "$work/repo" -c user.name=demo -c user.email=demo@example.invalid commit -qm sample

run() { echo; echo "\$ interpreter run $*"; .venv/bin/interpreter run "$@"; }
run examples/rename_identifier.js --cwd "$work/repo" calc_total compute_total
run examples/migrate_import.js --cwd "$work/repo" shop.legacy_utils shop.text
run examples/add_license_header.js --cwd "$work/repo" py "SPDX-License-Identifier: MIT"

echo; echo "What changed in the sample repository:"
git -C "$work/repo" --no-pager diff --stat
git -C "$work/repo" --no-pager diff -- src/shop/receipt.py
