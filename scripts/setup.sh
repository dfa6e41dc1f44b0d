#!/usr/bin/env bash
# The contributor set-up: the runtime (scripts/setup-runtime.sh) plus the test tools —
# pytest, ruff, pexpect, Ray for the batch test, the Codex SDK and CLI, third-party MCP
# servers and the local model servers. Safe to run again: it only reinstalls when
# pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")/.."
# What it installs is independent: the npm packages (the Codex SDK, the MCP servers and
# the Codex CLI the tests drive) and the local model servers' build need nothing from
# .venv, so they run beside the Python install, and setup waits for them all.
mkdir -p .venv

# The official Codex SDK, for the drop-in test (tests/test_codex_sdk.py). Optional: without
# npm or a registry this step is skipped and that test says why. --omit=optional leaves
# out Codex's own binaries: the test points the SDK at our executable.
sdk_version=${CODEX_SDK_VERSION:-0.163.0}
sdk_dir=.cache/codex-sdk
if [ ! -f "$sdk_dir/node_modules/@openai/codex-sdk/package.json" ] && command -v npm >/dev/null; then
  mkdir -p "$sdk_dir"
  if ! (cd "$sdk_dir" && timeout 300 npm install --omit=optional --no-audit --no-fund \
          --no-save "@openai/codex-sdk@$sdk_version") >"$sdk_dir/install.log" 2>&1; then
    echo "setup: could not install @openai/codex-sdk (see $sdk_dir/install.log);" \
         "tests/test_codex_sdk.py will be skipped" >&2
  fi
fi &
sdk_pid=$!
# Third-party MCP servers and the Codex CLI for the tests (never fails setup; see the
# script).
bash scripts/setup-test-servers.sh &
servers_pid=$!

# A real llama.cpp server and a small model for tests/test_local_model.py, cached in
# ~/.cache/codemode (never fails setup; CODEMODE_LOCAL_MODEL=0 skips it). With
# CODEMODE_LOCAL_MODEL_BACKGROUND=1 (scripts/test.sh) a build that is needed runs in the
# background, in a process group of its own named in .venv/.local-model-build.pid, and
# outlives setup; otherwise setup waits for it. Niced: the installs beside it, and the
# suite with its timing-bound tests (limits, cancellation), come first.
rm -f .venv/.local-model-build.pid
local_model_pid=
if ! bash scripts/setup-local-model.sh --check; then
  if [ -n "${CODEMODE_LOCAL_MODEL_BACKGROUND:-}" ]; then
    setsid nice -n 19 bash scripts/setup-local-model.sh </dev/null >/dev/null 2>&1 &
    echo $! > .venv/.local-model-build.pid
    echo "setup: building the local model servers in the background (the tests that need them start once the build ends)" >&2
  else
    nice -n 19 bash scripts/setup-local-model.sh &
    local_model_pid=$!
  fi
fi

# The runtime and the test tools (pytest, ruff, mypy, Ray for the batch test, ...) in one
# install; setup-test-tools.sh adds the test tools where the runtime was already there
# (scripts/demo.sh installs it alone).
bash scripts/setup-runtime.sh --with-test-tools
bash scripts/setup-test-tools.sh

wait "$sdk_pid" "$servers_pid"
[ -z "$local_model_pid" ] || wait "$local_model_pid"
