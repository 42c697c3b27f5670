#!/usr/bin/env bash
# `make run`: the whole app on embedded defaults — the web server (uvicorn, config/serve.py),
# a real Celery worker and Celery beat (the periodic sweeps) on the filesystem broker.
# Ctrl-C stops them all.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
PORT=${PORT:-8000}
export ATRIUM_APP_ORIGIN=${ATRIUM_APP_ORIGIN:-http://localhost:$PORT}
export ATRIUM_SANDBOX_ORIGIN=${ATRIUM_SANDBOX_ORIGIN:-http://*.localhost:$PORT}
VAR=${ATRIUM_VAR_DIR:-var}
mkdir -p "$VAR/log"

[ -d tools/mcp-servers/node_modules ] || bash tools/install-mcp-servers.sh || \
  echo "(third-party MCP servers not installed; the examples still work)"

$BIN/python manage.py migrate --no-input -v0
$BIN/python manage.py collectstatic --no-input -v0
$BIN/python manage.py atrium_bootstrap

source scripts/lib/processes.sh
pids=()
stop() {
  trap - INT TERM
  echo
  echo "Stopping Atrium..."
  stop_processes 10 "${pids[@]}"
  echo "Stopped."
  exit 0
}
trap stop INT TERM

$BIN/celery -A config worker --pool=solo --loglevel=INFO --without-gossip --without-mingle \
  --without-heartbeat >"$VAR/log/celery.log" 2>&1 &
pids+=($!)
$BIN/celery -A config beat --loglevel=INFO >"$VAR/log/beat.log" 2>&1 &
pids+=($!)
# The ASGI server (uvicorn) with Atrium's limits: config/serve.py.
$BIN/python -m config.serve --port "$PORT" >"$VAR/log/server.log" 2>&1 &
pids+=($!)

for _ in $(seq 1 100); do
  curl -fsS -o /dev/null "$ATRIUM_APP_ORIGIN/login/" 2>/dev/null && break
  sleep 0.2
done
echo
echo "  Atrium is running:  $ATRIUM_APP_ORIGIN/"
echo "  Sandbox origin:     $ATRIUM_SANDBOX_ORIGIN"
echo "  Logs:               $VAR/log/server.log, $VAR/log/celery.log, $VAR/log/beat.log"
echo "  Press Ctrl-C to stop."
echo
# Any child: each background job here is one of the three. (`wait -n` given pids can miss a
# child bash has already reaped.) A trapped Ctrl-C ends the wait too, in the trap's stop.
wait -n || true
echo "A process exited unexpectedly; see $VAR/log/." >&2
stop
