#!/usr/bin/env bash
# Install the third-party MCP servers that tests and examples run (tools/mcp-servers).
#
# Runs `npm ci` only when node_modules is missing or package.json / package-lock.json changed
# since the last install (a stamp file inside node_modules records their hash), so calling
# it before every test run is cheap.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dir="$here/mcp-servers"
stamp="$dir/node_modules/.atrium-install-stamp"

if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
  echo "install-mcp-servers: node and npm are required (Node.js >= 20)" >&2
  exit 1
fi
node_major="$(node -p 'process.versions.node.split(".")[0]')"
if (( node_major < 20 )); then
  echo "install-mcp-servers: Node.js >= 20 is required (found $(node --version))" >&2
  exit 1
fi

want="$(cat "$dir/package.json" "$dir/package-lock.json" | sha256sum | cut -d' ' -f1)"
if [[ -d "$dir/node_modules" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  echo "install-mcp-servers: up to date"
  exit 0
fi

echo "install-mcp-servers: npm ci in $dir"
(cd "$dir" && npm ci --no-audit --no-fund)
echo "$want" >"$stamp"
