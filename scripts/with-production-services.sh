#!/usr/bin/env bash
# Run a command under the production profile: PostgreSQL + Redis on loopback.
# Starts the local services when they are not running (CI machines have them installed).
set -euo pipefail

PG_HOST=${PG_HOST:-127.0.0.1}
PG_PORT=${PG_PORT:-5432}
REDIS_PORT=${REDIS_PORT:-6379}

if ! pg_isready -h "$PG_HOST" -p "$PG_PORT" -q 2>/dev/null; then
  echo "Starting PostgreSQL..."
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start || true
  for _ in $(seq 1 30); do pg_isready -h "$PG_HOST" -p "$PG_PORT" -q && break; sleep 1; done
fi
if ! redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1; then
  echo "Starting Redis..."
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$REDIS_PORT" --save "" \
    --appendonly no --dir /tmp --logfile /tmp/atrium-redis.log
  for _ in $(seq 1 30); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 1; done
fi

export ATRIUM_PROFILE=production
export DATABASE_URL=${DATABASE_URL:-postgres://postgres@$PG_HOST:$PG_PORT/atrium}
export REDIS_URL=${REDIS_URL:-redis://127.0.0.1:$REDIS_PORT/0}
export CELERY_BROKER_URL=${CELERY_BROKER_URL:-redis://127.0.0.1:$REDIS_PORT/1}
echo "Production profile: DATABASE_URL=$DATABASE_URL REDIS_URL=$REDIS_URL CELERY_BROKER_URL=$CELERY_BROKER_URL"
exec "$@"
