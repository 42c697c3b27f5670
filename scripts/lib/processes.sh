# Sourced by scripts/run.sh and scripts/fleet.sh: how their Ctrl-C stops what they started.

# stop_processes <grace seconds> <pid>...: SIGTERM to each; whatever is still running after the
# grace (a Celery task that would not finish, a process stuck in shutdown) gets SIGKILL, named on
# stderr. Ctrl-C always ends in bounded time; a task cut off is redelivered (acks late) or
# found by beat's sweeps.
stop_processes() {
  local grace=$1
  shift
  local pid
  for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
  (
    sleep "$grace" >/dev/null 2>&1
    for pid in "$@"; do
      local what
      what=$(ps -o args= -p "$pid" 2>/dev/null) || continue
      echo "Still running ${grace}s after SIGTERM, killed: $what (pid $pid)" >&2
      kill -KILL "$pid" 2>/dev/null || true
    done
  ) &
  local watchdog=$!
  wait "$@" 2>/dev/null || true
  kill "$watchdog" 2>/dev/null || true
  wait "$watchdog" 2>/dev/null || true
}
