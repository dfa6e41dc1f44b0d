#!/usr/bin/env bash
# Create .venv and install codemode with its test tools. Safe to run again: it only
# reinstalls when pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "codemode needs Python 3.11 or newer (set PYTHON=/path/to/python3.11)" >&2
  exit 1
fi
[ -x .venv/bin/python ] || "$python" -m venv .venv

# The sandbox confines commands with bubblewrap (and seccomp through libseccomp). Install
# them where we can; without them the sandbox falls back to Landlock, or refuses to run
# commands in a restricted mode. Never fails the setup.
need=()
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so' || need+=(libseccomp2)
if [ ${#need[@]} -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
         apt-get install -y -qq --no-install-recommends "${need[@]}"; } >/dev/null 2>&1; then
    echo "setup: could not install ${need[*]} (the sandbox falls back to Landlock)" >&2
  fi
fi

stamp=.venv/.codemode-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  log=.venv/install.log
  # A path-file editable install: the import-hook kind costs ~7 ms at every start.
  if ! { .venv/bin/python -m pip install --upgrade pip \
         && .venv/bin/python -m pip install -e '.[test]' --config-settings editable_mode=compat
       } >"$log" 2>&1; then
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
# ~/.cache/codemode (never fails setup; CODEMODE_LOCAL_MODEL=0 skips it).
bash scripts/setup-local-model.sh
