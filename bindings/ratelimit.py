"""Rate limits: one token bucket per (kind, key), shared by every process in production.

Every request kind a view or a member can repeat has a bucket per user and, for view
requests, per view (DESIGN §8.10). A bucket holds up to ``burst`` tokens and refills at
``rate`` tokens a second; a request takes one token or is refused with the seconds until
one is back. In production the buckets live in Redis (``REDIS_URL``), updated by one Lua
script so that N web processes see one bucket and a concurrent flood cannot take more
tokens than exist. The embedded profile is one process: a dict under a lock does the same.

The bucket arithmetic is :func:`refill_and_take` (pure, unit-tested); both stores run it
(the Lua script is a line-for-line port). Each bucket also counts the requests it refused
since it last allowed one (``Verdict.skipped``).

Refusals are audited at a bounded rate by the same rule (:func:`audit_gate`): an audit row
is one more token from a bucket of its own (per person, per client address, per flooded
bucket...), and the row that is written carries how many went unwritten before it. A flood
leaves a trace, not a flood of rows: the production audit table is insert-only.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import threading
import time
import uuid
import weakref
from collections.abc import Mapping
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
    # Allowed: how many requests this bucket refused since it last allowed one.
    skipped: int = 0
    # A refusal the caller audits (see `take`): the first of a flood, then one every
    # few seconds (kind RATE_LIMITED_AUDIT), with the refusals in between not audited.
    audit: bool = False
    refused_since_audit: int = 0


@dataclass(frozen=True)
class AuditGate:
    """Whether to write the audit row of a refusal (`write`), and how many refusals of the
    same key were not written since the previous row (`skipped`, for that row to carry)."""

    write: bool
    skipped: int = 0


# The kind of the buckets that pace the audit rows of rate-limited requests: one per
# flooded bucket (settings: a burst of 1, refilled every few seconds).
RATE_LIMITED_AUDIT = "rate_limited_audit"


# Defaults of the kinds a layer above owns and declares with `limits_declare` (the view
# bridge's buckets, in its table: chat/actions/view_methods.py).
_DECLARED: dict[str, tuple[int, float]] = {}


def limits_declare(defaults: Mapping[str, tuple[int, float]]) -> None:
    """Declare default limits (kind → (burst, rate)); settings.ATRIUM_RATE_LIMITS overrides."""
    _DECLARED.update(defaults)


def limits() -> dict[str, Limit]:
    """The limits by kind: the declared defaults, overridden by (and with) the configured
    ones (settings.ATRIUM_RATE_LIMITS: kind → (burst, rate))."""
    configured = {**_DECLARED, **settings.ATRIUM_RATE_LIMITS}
    return {k: Limit(int(b), float(r)) for k, (b, r) in configured.items()}


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
        # key -> (tokens, updated, refused since the last allowed take)
        self.buckets: dict[str, tuple[float, float, int]] = {}

    def take(self, key: str, limit: Limit, now: float) -> Verdict:
        with self.lock:
            tokens, updated, skipped = self.buckets.get(key, (float(limit.burst), now, 0))
            allowed, left, wait = refill_and_take(tokens, updated, now, limit)
            if allowed:
                self.buckets[key] = (left, now, 0)
                return Verdict(True, 0.0, skipped=skipped)
            self.buckets[key] = (left, now, skipped + 1)
            return Verdict(False, wait, skipped=skipped + 1)

    def reset(self) -> None:
        with self.lock:
            self.buckets.clear()


# ---------------------------------------------------------------------- production store

# KEYS[1] bucket hash; ARGV: burst, rate, now. Returns {allowed, retry_after*1000, skipped}
# (skipped: refusals since the last allowed take; reset by it). Redis runs a script
# atomically. A bucket that holds a count of refusals lives a day, so that the next audit
# row of its key can still say how many went unwritten.
_LUA = """
local burst = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'updated', 'skipped')
local tokens = tonumber(state[1]) or burst
local updated = tonumber(state[2]) or now
local skipped = tonumber(state[3]) or 0
local elapsed = math.max(0, now - updated)
tokens = math.min(burst, tokens + elapsed * rate)
local ttl = math.ceil(burst / math.max(rate, 0.001)) + 1
if tokens >= 1 then
  redis.call('HSET', KEYS[1], 'tokens', tokens - 1, 'updated', now, 'skipped', 0)
  redis.call('EXPIRE', KEYS[1], ttl)
  return {1, 0, skipped}
end
local wait = -1
if rate > 0 then wait = math.ceil((1 - tokens) / rate * 1000) end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'updated', now, 'skipped', skipped + 1)
redis.call('EXPIRE', KEYS[1], math.max(ttl, 86400))
return {0, wait, skipped + 1}
"""

KEY_PREFIX = "atrium:rate:"
_key_prefix = KEY_PREFIX  # reset_for_tests() gives each test a namespace of its own


def _verdict(raw: list[Any]) -> Verdict:
    allowed, wait_ms, skipped = (int(x) for x in raw)
    if allowed:
        return Verdict(True, 0.0, skipped=skipped)
    return Verdict(False, math.inf if wait_ms < 0 else wait_ms / 1000, skipped=skipped)


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


def _take(kind: str, key: str) -> Verdict:
    global _sync_client
    limit = limits()[kind]
    if not _redis_url():
        return _local.take(f"{kind}:{key}", limit, _now())
    if _sync_client is None:
        import redis

        _sync_client = redis.Redis.from_url(_redis_url())
    try:
        raw = _sync_client.eval(
            _LUA, 1, _key_prefix + f"{kind}:{key}", limit.burst, limit.rate, _now()
        )
    except _UNREACHABLE as exc:
        return _unlimited(kind, exc)
    return _verdict(raw)


async def _take_async(kind: str, key: str) -> Verdict:
    limit = limits()[kind]
    if not _redis_url():
        return _local.take(f"{kind}:{key}", limit, _now())
    try:
        raw = await _async_client().eval(
            _LUA, 1, _key_prefix + f"{kind}:{key}", limit.burst, limit.rate, _now()
        )
    except _UNREACHABLE as exc:
        return _unlimited(kind, exc)
    return _verdict(raw)


def _with_audit(verdict: Verdict, gate: Verdict) -> Verdict:
    return dataclasses.replace(verdict, audit=gate.allowed, refused_since_audit=gate.skipped)


def take(kind: str, key: str) -> Verdict:
    """Take one token from the ``kind`` bucket of ``key`` (sync callers). A refusal says
    whether to audit it (`audit_gate` on the flooded bucket)."""
    verdict = _take(kind, key)
    if verdict.allowed:
        return verdict
    return _with_audit(verdict, _take(RATE_LIMITED_AUDIT, f"{kind}:{key}"))


async def take_async(kind: str, key: str) -> Verdict:
    """Take one token from the ``kind`` bucket of ``key`` (async callers: no thread hop)."""
    verdict = await _take_async(kind, key)
    if verdict.allowed:
        return verdict
    return _with_audit(verdict, await _take_async(RATE_LIMITED_AUDIT, f"{kind}:{key}"))


def audit_gate(kind: str, key: str) -> AuditGate:
    """Whether a refusal of ``key`` gets its audit row now: a token from the ``kind``
    bucket of ``key``. Refused, the refusal is only counted; the next row written for the
    key carries the count (``skipped``)."""
    verdict = _take(kind, key)
    return AuditGate(write=verdict.allowed, skipped=verdict.skipped)


def refusal_gate(*, user: Any = None, client: str = "") -> dict[str, Any] | None:
    """Whether a refusal gets its audit row now (DESIGN §8.10: every refusal is audited, at
    a bounded rate per person, or per client address before sign-in): ``None`` when it is
    only counted; otherwise what its row adds to ``extra`` (``{"skipped": N}`` when N
    refusals of the same person or address went unwritten since their previous row)."""
    if getattr(user, "is_authenticated", False):
        key = f"user:{user.pk}"
    else:
        key = f"addr:{client[:100] or 'unknown'}"
    gate = audit_gate("refusal_audit", key)
    if not gate.write:
        return None
    return {"skipped": gate.skipped} if gate.skipped else {}


# A Redis that restarts or is briefly unreachable must not turn every request into an
# internal error: the buckets fail open (logged) while redis-py reconnects. They limit
# load; authority is decided by the policy, which does not depend on Redis.
_UNREACHABLE = (RedisConnectionError, RedisTimeoutError)


def _unlimited(kind: str, exc: Exception) -> Verdict:
    log.warning("rate limit %s not applied: Redis unreachable (%s)", kind, exc)
    return Verdict(allowed=True, retry_after=0.0)


def reset_for_tests() -> None:
    """Start every bucket full: empty the local store, and move this process's Redis keys
    to a fresh namespace (the suite's processes share one Redis database, and a test
    database numbers its rows from 1 again, so one test's drained bucket would otherwise
    meet the next test, or the next run within the keys' expiry)."""
    global _key_prefix
    _local.reset()
    _key_prefix = f"{KEY_PREFIX}test-{uuid.uuid4().hex[:12]}:"
