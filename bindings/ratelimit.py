"""Rate limits: one token bucket per (kind, key), shared by every process in production.

Every request kind a view or a member can repeat has a bucket per user and, for view
requests, per view (DESIGN §8.10). A bucket holds up to ``burst`` tokens and refills at
``rate`` tokens a second; a request takes one token or is refused with the seconds until
one is back. In production the buckets live in Redis (``REDIS_URL``), updated by one Lua
script so that N web processes see one bucket and a concurrent flood cannot take more
tokens than exist. The embedded profile is one process: a dict under a lock does the same.

The bucket arithmetic is :func:`refill_and_take` (pure, unit-tested); both stores run it
(the Lua script is a line-for-line port).
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Limit:
    burst: int  # tokens a full bucket holds
    rate: float  # tokens added per second


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    retry_after: float  # seconds until a token is back (0 when allowed)
    # The first refusal of this bucket for a while: the caller audits it (a flood leaves one
    # row per AUDIT_EVERY seconds per bucket, with the number of refusals in between).
    audit: bool = False
    refused_since_audit: int = 0


AUDIT_EVERY = 10.0  # seconds between audited refusals of one bucket


def limits() -> dict[str, Limit]:
    """The configured limits by kind (settings.ATRIUM_RATE_LIMITS: kind → (burst, rate))."""
    return {k: Limit(int(b), float(r)) for k, (b, r) in settings.ATRIUM_RATE_LIMITS.items()}


def refill_and_take(
    tokens: float, updated: float, now: float, limit: Limit
) -> tuple[bool, float, float]:
    """One request against a bucket holding ``tokens`` at time ``updated``:
    ``(allowed, tokens_left, retry_after)``."""
    elapsed = max(0.0, now - updated)
    tokens = min(float(limit.burst), tokens + elapsed * limit.rate)
    if tokens >= 1.0:
        return True, tokens - 1.0, 0.0
    wait = math.inf if limit.rate <= 0 else (1.0 - tokens) / limit.rate
    return False, tokens, wait


# ------------------------------------------------------------------------ embedded store


class _LocalStore:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.buckets: dict[str, tuple[float, float]] = {}
        self.refusals: dict[str, tuple[float, int]] = {}  # last audited at, refused since

    def take(self, key: str, limit: Limit, now: float) -> Verdict:
        with self.lock:
            tokens, updated = self.buckets.get(key, (float(limit.burst), now))
            allowed, left, wait = refill_and_take(tokens, updated, now, limit)
            self.buckets[key] = (left, now)
            if allowed:
                return Verdict(True, 0.0)
            last, count = self.refusals.get(key, (-math.inf, 0))
            if now - last >= AUDIT_EVERY:
                self.refusals[key] = (now, 0)
                return Verdict(False, wait, audit=True, refused_since_audit=count)
            self.refusals[key] = (last, count + 1)
            return Verdict(False, wait)

    def reset(self) -> None:
        with self.lock:
            self.buckets.clear()
            self.refusals.clear()


# ---------------------------------------------------------------------- production store

# KEYS[1] bucket hash; ARGV: burst, rate, now, audit_every. Returns
# {allowed, retry_after*1000, audit, refused_since_audit}. Redis runs a script atomically.
_LUA = """
local burst = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local audit_every = tonumber(ARGV[4])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'updated', 'audited', 'refused')
local tokens = tonumber(state[1]) or burst
local updated = tonumber(state[2]) or now
local audited = tonumber(state[3]) or -1e18
local refused = tonumber(state[4]) or 0
local elapsed = math.max(0, now - updated)
tokens = math.min(burst, tokens + elapsed * rate)
local ttl = math.ceil(burst / math.max(rate, 0.001)) + audit_every + 1
if tokens >= 1 then
  redis.call('HSET', KEYS[1], 'tokens', tokens - 1, 'updated', now)
  redis.call('EXPIRE', KEYS[1], ttl)
  return {1, 0, 0, 0}
end
local wait = -1
if rate > 0 then wait = math.ceil((1 - tokens) / rate * 1000) end
local audit = 0
local since = 0
if now - audited >= audit_every then
  audit = 1
  since = refused
  redis.call('HSET', KEYS[1], 'audited', now, 'refused', 0)
else
  redis.call('HINCRBY', KEYS[1], 'refused', 1)
end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'updated', now)
redis.call('EXPIRE', KEYS[1], ttl)
return {0, wait, audit, since}
"""

_KEY_PREFIX = "atrium:rate:"


def _verdict(raw: list[Any]) -> Verdict:
    allowed, wait_ms, audit, since = (int(x) for x in raw)
    if allowed:
        return Verdict(True, 0.0)
    retry = math.inf if wait_ms < 0 else wait_ms / 1000
    return Verdict(False, retry, audit=bool(audit), refused_since_audit=since)


_async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = (
    weakref.WeakKeyDictionary()
)
_sync_client: Any = None
_local = _LocalStore()


def _redis_url() -> str:
    return getattr(settings, "REDIS_URL", "") or ""


def _async_client() -> Any:
    loop = asyncio.get_running_loop()
    client = _async_clients.get(loop)
    if client is None:
        import redis.asyncio as aioredis

        client = aioredis.Redis.from_url(_redis_url())
        _async_clients[loop] = client
    return client


def _now() -> float:
    # Wall clock, not monotonic: buckets are shared between processes (and machines).
    return time.time()


def take(kind: str, key: str) -> Verdict:
    """Take one token from the ``kind`` bucket of ``key`` (sync callers)."""
    global _sync_client
    limit = limits()[kind]
    if not _redis_url():
        return _local.take(f"{kind}:{key}", limit, _now())
    if _sync_client is None:
        import redis

        _sync_client = redis.Redis.from_url(_redis_url())
    try:
        raw = _sync_client.eval(
            _LUA, 1, _KEY_PREFIX + f"{kind}:{key}", limit.burst, limit.rate, _now(), AUDIT_EVERY
        )
    except _UNREACHABLE as exc:
        return _unlimited(kind, exc)
    return _verdict(raw)


async def take_async(kind: str, key: str) -> Verdict:
    """Take one token from the ``kind`` bucket of ``key`` (async callers: no thread hop)."""
    limit = limits()[kind]
    if not _redis_url():
        return _local.take(f"{kind}:{key}", limit, _now())
    try:
        raw = await _async_client().eval(
            _LUA, 1, _KEY_PREFIX + f"{kind}:{key}", limit.burst, limit.rate, _now(), AUDIT_EVERY
        )
    except _UNREACHABLE as exc:
        return _unlimited(kind, exc)
    return _verdict(raw)


# A Redis that restarts or is briefly unreachable must not turn every request into an
# internal error: the buckets fail open (logged) while redis-py reconnects. They limit
# load; authority is decided by the policy, which does not depend on Redis.
_UNREACHABLE = (RedisConnectionError, RedisTimeoutError)


def _unlimited(kind: str, exc: Exception) -> Verdict:
    log.warning("rate limit %s not applied: Redis unreachable (%s)", kind, exc)
    return Verdict(allowed=True, retry_after=0.0)


def reset_for_tests() -> None:
    """Empty every bucket (the local store; a test's Redis database is flushed instead)."""
    _local.reset()
