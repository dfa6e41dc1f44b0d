#!/usr/bin/env bash
# Quick start, part one: set up the runtime, run batch refactors on a copy of the bundled sample
# repository and show what they changed, then replay a recorded agent session in which
# a model fixes a failing test. No model service and no API key involved.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-runtime.sh  # the runtime only, none of the test tools

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

echo
echo "A recorded code-mode session: the model fixes a failing test in examples/bugfix-repo."
echo "Its replies are replayed from examples/sessions/fix-failing-test.jsonl; the tools run for real."
cp -r examples/bugfix-repo "$work/bugfix"
echo "\$ python3 -m unittest -q   (before)"
(cd "$work/bugfix" && python3 -m unittest -q 2>&1 | tail -1) || true
echo "\$ interpreter exec --replay examples/sessions/fix-failing-test.jsonl -C $work/bugfix"
CODEMODE_HOME="$work/home" .venv/bin/interpreter exec \
  --replay examples/sessions/fix-failing-test.jsonl -C "$work/bugfix"
echo "\$ python3 -m unittest -q   (after)"
(cd "$work/bugfix" && python3 -m unittest -q 2>&1 | tail -1)
