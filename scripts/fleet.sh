#!/usr/bin/env bash
# `make fleet`: Atrium as a production fleet on one machine (DESIGN §1, docs/fleet.md):
# nginx (round robin, websocket upgrade, no stickiness) in front of 3 web processes (uvicorn,
# config/serve.py), 2 Celery workers and 1 Celery beat, on PostgreSQL + Redis. Ctrl-C stops
# them all.
#
# Settings (environment): FLEET_PORT (nginx, default 8000), FLEET_WEB_PROCESSES (3),
# FLEET_WORKERS (2), FLEET_WEB_PORTS (space separated; default FLEET_PORT+1, +2, ...),
# NGINX (the binary), ATRIUM_VAR_DIR (var), FLEET_DEMO=0 (no demo workspace and servers).
# Without DATABASE_URL it runs itself under scripts/with-production-services.sh
# (PostgreSQL and Redis on loopback).
#
# $ATRIUM_VAR_DIR/fleet/processes lists "name pid port" of every process once all answer.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${DATABASE_URL:-}" ]; then
  exec bash scripts/with-production-services.sh bash scripts/fleet.sh "$@"
fi
BIN=${ATRIUM_BIN:-.venv/bin}
PORT=${FLEET_PORT:-8000}
WEB_PROCESSES=${FLEET_WEB_PROCESSES:-3}
WORKERS=${FLEET_WORKERS:-2}
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
[ -x "$NGINX" ] || { echo "nginx is not installed: run 'make nginx'" >&2; exit 1; }
read -r -a WEB_PORTS <<<"${FLEET_WEB_PORTS:-$(seq -s ' ' $((PORT + 1)) $((PORT + WEB_PROCESSES)))}"
[ "${#WEB_PORTS[@]}" = "$WEB_PROCESSES" ] || { echo "FLEET_WEB_PORTS needs $WEB_PROCESSES ports" >&2; exit 1; }

export ATRIUM_PROFILE=production
export ATRIUM_ASGI_PROCESSES=$WEB_PROCESSES
export ATRIUM_APP_ORIGIN=${ATRIUM_APP_ORIGIN:-http://localhost:$PORT}
export ATRIUM_SANDBOX_ORIGIN=${ATRIUM_SANDBOX_ORIGIN:-http://*.localhost:$PORT}
export PYTHONUNBUFFERED=1
VAR=$(realpath -m "${ATRIUM_VAR_DIR:-var}")
export ATRIUM_VAR_DIR=$VAR
# nginx sends media files itself, from the settings' default MEDIA_ROOT (docs/fleet.md).
MEDIA_ROOT=$(realpath -m "${MEDIA_ROOT:-$VAR/media}")
export MEDIA_ROOT
export ATRIUM_MEDIA_ACCEL_REDIRECT=/_media_files/
RUN=$VAR/fleet
LOG=$VAR/log
mkdir -p "$RUN/nginx-temp" "$LOG"
rm -f "$RUN/processes"

$BIN/python manage.py migrate --no-input -v0
$BIN/python manage.py collectstatic --no-input -v0
[ "${FLEET_DEMO:-1}" = 0 ] || $BIN/python manage.py atrium_bootstrap  # the demo workspace

upstreams=""
for port in "${WEB_PORTS[@]}"; do
  upstreams+="        server 127.0.0.1:$port max_fails=1 fail_timeout=5s;"$'\n'
done
# nginx's workers run as whoever runs the fleet, as the web processes do: started by root, nginx
# would switch them to "nobody", who can neither read the media files nor write the temp
# files under a private var dir.
worker_user=""
[ "$(id -u)" = 0 ] && worker_user="user $(id -un) $(id -gn);"$'\n'
# The template's placeholders, replaced line by line (paths may hold any character but "|").
while IFS= read -r line; do
  if [ "$line" = "@UPSTREAMS@" ]; then printf '%s' "$upstreams"; continue; fi
  if [ "$line" = "@WORKER_USER@" ]; then printf '%s' "$worker_user"; continue; fi
  line=${line//@RUN@/$RUN}
  line=${line//@LOG@/$LOG}
  line=${line//@MEDIA_ROOT@/$MEDIA_ROOT}
  line=${line//@LISTEN@/127.0.0.1:$PORT}
  printf '%s\n' "$line"
done <deploy/nginx/fleet.conf >"$RUN/nginx.conf"
"$NGINX" -t -q -p "$RUN" -e "$LOG/nginx-error.log" -c "$RUN/nginx.conf"

declare -A names=()
pids=()
started() { pids+=("$1"); names[$1]=$2; echo "$2 $1 ${3:-}" >>"$RUN/processes.new"; }
rm -f "$RUN/processes.new"

source scripts/lib/processes.sh
stop() {
  trap - INT TERM
  echo
  echo "Stopping the fleet..."
  # A worker's task in flight gets this long to finish (warm shutdown), then is redelivered.
  stop_processes 20 "${pids[@]}"
  rm -f "$RUN/processes"
  echo "Stopped."
  exit 0
}
trap stop INT TERM

n=0
for port in "${WEB_PORTS[@]}"; do
  n=$((n + 1))
  $BIN/python -m config.serve --port "$port" >"$LOG/web-$n.log" 2>&1 &
  started $! "web-$n" "$port"
done
for n in $(seq 1 "$WORKERS"); do
  $BIN/celery -A config worker --pool=solo --loglevel=INFO --without-gossip --without-mingle \
    --without-heartbeat -n "worker$n@%h" >"$LOG/celery-$n.log" 2>&1 &
  started $! "worker-$n"
done
$BIN/celery -A config beat --loglevel=INFO --schedule "$RUN/celery-beat-schedule" \
  >"$LOG/beat.log" 2>&1 &
started $! beat
"$NGINX" -p "$RUN" -e "$LOG/nginx-error.log" -c "$RUN/nginx.conf" -g "daemon off;" &
started $! nginx "$PORT"

for port in "${WEB_PORTS[@]}" "$PORT"; do
  for _ in $(seq 1 300); do
    curl -fsS -o /dev/null "http://127.0.0.1:$port/login/" -H "Host: localhost:$PORT" \
      2>/dev/null && break
    sleep 0.1
  done
done
mv "$RUN/processes.new" "$RUN/processes"
echo
echo "  The Atrium fleet is running:  $ATRIUM_APP_ORIGIN/ (nginx)"
echo "  Sandbox origins:              $ATRIUM_SANDBOX_ORIGIN"
echo "  Behind it:                    $WEB_PROCESSES web processes (ports ${WEB_PORTS[*]}), $WORKERS Celery workers, 1 beat"
echo "  Processes:                    $RUN/processes"
echo "  Logs:                         $LOG/"
echo "  Press Ctrl-C to stop."
echo

# One process dying (a crash, a SIGKILL) does not stop the others: clients reconnect
# through nginx to the web processes left, the other worker takes the queue. The fleet stops when
# nginx stops or no web process is left.
alive_web=$WEB_PROCESSES
while :; do
  set +e
  # Any child: every background job here is one of the fleet's processes. (Naming them once
  # got "wait: <pid>: no such job" back, for a child bash had already reaped.)
  wait -n -p gone
  code=$?
  set -e
  if [ -z "${gone:-}" ]; then
    # A signal cut the wait short (its trap has run), or no child is left to wait for.
    [ "$code" = 127 ] && stop
    continue
  fi
  name=${names[$gone]}
  echo "$(date -u +%H:%M:%S) $name (pid $gone) exited with status $code; see $LOG/" >&2
  remaining=()
  for pid in "${pids[@]}"; do [ "$pid" = "$gone" ] || remaining+=("$pid"); done
  pids=("${remaining[@]}")
  case $name in
    web-*) alive_web=$((alive_web - 1)) ;;
  esac
  if [ "$name" = nginx ] || [ "$alive_web" = 0 ]; then
    stop
  fi
  gone=""
done
