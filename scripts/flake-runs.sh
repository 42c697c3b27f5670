#!/usr/bin/env bash
# The flake check of docs/testing.md: the browser and live-server suites, N runs in a row
# (default 20) in two pytest-xdist workers (PYTEST_PARALLEL="-n 2"), so every test runs
# with the other core busy. Stops at the first failing run; its output stays in
# test-artifacts/flake-runs/run-<n>.log.
#   bash scripts/flake-runs.sh [N] [extra pytest arguments...]
set -uo pipefail
cd "$(dirname "$0")/.."
unset PYTHONDONTWRITEBYTECODE  # bytecode cached, as under `make test` (Makefile)
runs=${1:-20}
shift || true
logs=test-artifacts/flake-runs
mkdir -p "$logs"
suites=(
  tests/browser tests/compat tests/resilience tests/fleet tests/oauth
  tests/hardening/test_live_limits.py tests/audit_review/test_reports_browser.py
  tests/bindings/test_admin.py tests/chat/test_media_e2e.py tests/chat/test_text_channel.py
  tests/foundation/test_make_run.py tests/conformance tests/chat/test_tool_call_tasks.py
  tests/chat/test_server_requests.py tests/chat/test_attachments.py tests/chat/test_tool_files.py
  tests/chat/test_view_files.py tests/chat/test_message_delete.py tests/examples/test_files.py
)
for n in $(seq 1 "$runs"); do
  start=$(date +%s)
  .venv/bin/pytest -q -n 2 -p no:cacheprovider "${suites[@]}" "$@" \
    >"$logs/run-$n.log" 2>&1
  status=$?
  summary=$(tail -n 1 "$logs/run-$n.log")
  echo "run $n/$runs: exit $status in $(($(date +%s) - start)) s: $summary"
  if [ "$status" -ne 0 ]; then
    echo "run $n failed: $logs/run-$n.log"
    exit "$status"
  fi
done
echo "$runs runs in a row passed"
