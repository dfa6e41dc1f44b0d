#!/usr/bin/env bash
# npm packages the tests drive, each into its own folder under .cache/ keyed by version:
#   MCP servers (@modelcontextprotocol/server-filesystem, -memory, -everything) in
#   .cache/mcp-servers, the TypeScript compiler (tsc --strict on `tools --dts`) in
#   .cache/typescript, and the ACP SDK (@agentclientprotocol/sdk, its zod schemas check
#   what `interpreter acp` sends) in .cache/acp-sdk.
# Plus the Codex CLI's own linux x64 binaries, versions 0.171.0, 0.169.0 and 0.148.0: the
# tests of `interpreter code-mode-host` run real Codex turns with it
# (tests/test_codex_cli_host.py; 0.171 and 0.169 speak gRPC to their host, 0.148 the
# framed stdio protocol; 0.171 is the revision docs/codex-host.md derives), and
# benchmarks/codex_compare.py and benchmarks/codex_host.py compare against it. The npm
# package ships them as a platform build of the same package (`@openai/codex@V-linux-x64`,
# the optional dependency that `npm --omit=optional` leaves out), so each is installed
# directly, once per version, outside the clone in $CODEMODE_CACHE (default
# ~/.cache/codemode)/codex-V: about 170 MB to fetch, 400 MB unpacked each.
# CODEMODE_CODEX=0 skips them (those tests then skip and say why); CODEX_CLI_VERSIONS
# chooses other versions.
# The installs are independent (downloads and unpacking, mostly): they run at once.
# Never fails setup: without node/npm or a registry the tests that need a package skip
# and print why (each folder's install.log says what happened).
set -uo pipefail
cd "$(dirname "$0")/.."

install() {  # install DIR MARKER PACKAGE...
  local dir=$1 marker=$2
  shift 2
  local stamp="$dir/.installed-$(echo "$*" | tr ' /@' '___')"
  if [ -e "$stamp" ] && [ -e "$dir/$marker" ]; then
    return 0
  fi
  mkdir -p "$dir"
  if ! command -v npm >/dev/null 2>&1; then
    echo "npm not found: cannot install $*" > "$dir/install.log"
    echo "setup: npm not found; tests needing $* will skip" >&2
    return 0
  fi
  if timeout 300 npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "$@" \
      >"$dir/install.log" 2>&1 && [ -e "$dir/$marker" ]; then
    touch "$stamp"
  else
    echo "setup: npm install $* failed (see $dir/install.log); those tests will skip" >&2
  fi
}

mcp_version=2026.8.31
install .cache/mcp-servers node_modules/.bin/mcp-server-everything \
  "@modelcontextprotocol/server-filesystem@$mcp_version" \
  "@modelcontextprotocol/server-memory@$mcp_version" \
  "@modelcontextprotocol/server-everything@$mcp_version" &
install .cache/typescript node_modules/.bin/tsc typescript@7.0.2 &
install .cache/acp-sdk node_modules/@agentclientprotocol/sdk/package.json \
  @agentclientprotocol/sdk@2.4.0 &

codex_versions=${CODEX_CLI_VERSIONS:-${CODEX_CLI_VERSION:-0.169.0} 0.148.0 0.171.0}
if [ "${CODEMODE_CODEX:-1}" = 1 ] && [ "$(uname -s)-$(uname -m)" = Linux-x86_64 ]; then
  for codex_version in $codex_versions; do
    install "${CODEMODE_CACHE:-$HOME/.cache/codemode}/codex-$codex_version" \
      node_modules/@openai/codex/vendor/x86_64-unknown-linux-musl/bin/codex \
      "@openai/codex@$codex_version-linux-x64" &
  done
fi
wait
exit 0
