#!/usr/bin/env bash
# The contributor set-up: the runtime (scripts/setup-runtime.sh) plus the test tools —
# pytest, ruff, pexpect, Ray for the batch test, the Codex SDK and third-party MCP
# servers. Safe to run again: it only reinstalls when pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-runtime.sh

stamp=.venv/.codemode-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  log=.venv/install.log
  # The runtime venv may have been made without pip (the quick way): the host's pip
  # then installs into it, as it did the runtime.
  if .venv/bin/python -m pip --version >/dev/null 2>&1; then
    install=(.venv/bin/python -m pip install)
  else
    install=("${PYTHON:-python3}" -m pip --python .venv/bin/python install)
  fi
  if ! "${install[@]}" -e '.[agent,test]' --config-settings editable_mode=compat >"$log" 2>&1; then
    cat "$log" >&2
    echo "setup: pip install failed (log above, also in $log)" >&2
    exit 1
  fi
  .venv/bin/python -c 'import codemode, quickjs, py_mini_racer, pytest' \
    || { echo "setup: installing codemode failed" >&2; exit 1; }
  echo "$want" > "$stamp"
fi

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
fi
# Third-party MCP servers for the tests (never fails setup; see the script).
bash scripts/setup-test-servers.sh
# A real llama.cpp server and a small model for tests/test_local_model.py, cached in
# ~/.cache/codemode (never fails setup; CODEMODE_LOCAL_MODEL=0 skips it). With
# CODEMODE_LOCAL_MODEL_BACKGROUND=1 (scripts/test.sh) a build that is needed runs in the
# background, in a process group of its own named in .venv/.local-model-build.pid.
rm -f .venv/.local-model-build.pid
if [ -n "${CODEMODE_LOCAL_MODEL_BACKGROUND:-}" ]; then
  if ! bash scripts/setup-local-model.sh --check; then
    # niced: the suite beside it runs timing-bound tests (limits, cancellation)
    setsid nice -n 19 bash scripts/setup-local-model.sh </dev/null >/dev/null 2>&1 &
    echo $! > .venv/.local-model-build.pid
    echo "setup: building the local model servers in the background (the tests that need them start once the build ends)" >&2
  fi
else
  bash scripts/setup-local-model.sh
fi
