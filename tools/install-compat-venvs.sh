#!/usr/bin/env bash
# Virtual environments of the third-party Python MCP SDKs the compatibility suite runs
# (tests/compat): each pins its own `mcp`, so each gets a venv of its own under .tools/venvs/
# (git-ignored), from tools/compat-venvs/<name>.txt (top-level pins) and <name>.lock.txt
# (every package, `pip freeze` of a good install) when present.
#
# Installs only when a venv is missing or its files changed since (a stamp inside the venv
# records their hash), so calling it before every test run is cheap. Offline once installed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
python="${PYTHON:-python3}"

# pip's notes about this machine's extra index folders are noise here; real errors stay.
quiet_pip() { "$@" 2> >(grep -v "^WARNING: Location '" >&2); }

for spec in "$here"/compat-venvs/*.txt; do
  case "$spec" in *.lock.txt) continue ;; esac
  name="$(basename "$spec" .txt)"
  lock="$here/compat-venvs/$name.lock.txt"
  venv="$root/.tools/venvs/$name"
  stamp="$venv/.atrium-install-stamp"
  want="$(cat "$spec" "$lock" 2>/dev/null | sha256sum | cut -d' ' -f1)"
  if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    echo "install-compat-venvs: $name up to date"
    continue
  fi
  echo "install-compat-venvs: $name into $venv"
  rm -rf "$venv"
  "$python" -m venv "$venv"
  if [[ -f "$lock" ]]; then
    quiet_pip "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$spec" -c "$lock"
  else
    quiet_pip "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$spec"
  fi
  echo "$want" >"$stamp"
done
