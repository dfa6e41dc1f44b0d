#!/usr/bin/env bash
# Third-party MCP servers the tests drive: @modelcontextprotocol/server-filesystem from
# the npm registry, into .cache/mcp-servers. Never fails setup: without node/npm or a
# registry the tests that need the server skip and print why (the log below).
set -uo pipefail
cd "$(dirname "$0")/.."

dir=.cache/mcp-servers
package=@modelcontextprotocol/server-filesystem@2026.8.31
log=$dir/install.log
[ -x "$dir/node_modules/.bin/mcp-server-filesystem" ] && exit 0
mkdir -p "$dir"
if ! command -v npm >/dev/null 2>&1; then
  echo "npm not found: cannot install $package" > "$log"
  echo "setup: npm not found; MCP filesystem-server tests will skip" >&2
  exit 0
fi
if ! npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "$package" >"$log" 2>&1; then
  echo "setup: npm install $package failed (see $log); those tests will skip" >&2
fi
exit 0
