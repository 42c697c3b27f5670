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

A request that takes several buckets (a view's request: the person's and the view's) takes
them with :func:`take_all` / :func:`take_all_async`: in the order given, a token from each
until one refuses; the buckets before the refusal keep their token taken, the refusing one
counts the refusal, the ones after it are not touched, and the refusal's audit gate (below)
is taken with it. In production that is one ``EVALSHA`` (one Redis round trip, atomic; the
script is sent once per Redis server, ``SCRIPT LOAD`` again after ``NOSCRIPT``); the
embedded store does the same under its lock.

Refusals are audited at a bounded rate by the same rule (:func:`audit_gate`): an audit row
is one more token from a bucket of its own (per person, per client address, per flooded
bucket...), and the row that is written carries how many went unwritten before it. A flood
leaves a trace, not a flood of rows: the production audit table is insert-only.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import math
import threading
import time
import uuid
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError
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
    # Refused: the kind of the bucket that refused (`take_all` takes several).
    kind: str = ""


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

    def _take(self, key: str, limit: Limit, now: float) -> Verdict:
        tokens, updated, skipped = self.buckets.get(key, (float(limit.burst), now, 0))
        allowed, left, wait = refill_and_take(tokens, updated, now, limit)
        if allowed:
            self.buckets[key] = (left, now, 0)
            return Verdict(True, 0.0, skipped=skipped)
        self.buckets[key] = (left, now, skipped + 1)
        return Verdict(False, wait, skipped=skipped + 1)

    def take_all(self, takes: list[_Take], audit: Limit | None, now: float) -> Verdict:
        """What the Lua script does, under the lock (see `take_all`)."""
        with self.lock:
            verdict = Verdict(True, 0.0)
            for take in takes:
                verdict = self._take(take.key, take.limit, now)
                if not verdict.allowed:
                    if audit is None:
                        return dataclasses.replace(verdict, kind=take.kind)
                    gate = self._take(take.audit_key, audit, now)
                    return _refused(verdict, take.kind, gate.allowed, gate.skipped)
            return verdict

    def reset(self) -> None:
        with self.lock:
            self.buckets.clear()


# ---------------------------------------------------------------------- production store

# One request against N buckets, atomically (Redis runs a script as one command).
# KEYS[1..N] the buckets' hashes, KEYS[N+1..2N] the audit-gate bucket of each;
# ARGV: now, the audit gate's burst and rate (burst -1: no gate), then burst and rate of
# each bucket. In order, a token from each bucket until one refuses (those before it keep
# their token taken, those after it are not touched); a refusal also takes from its audit
# gate.
# Returns {refused (1-based index, 0 when all allowed), retry_after*1000, skipped,
# audit allowed, audit skipped}; skipped: refusals since the bucket's last allowed take
# (reset by it; when all allowed, the last bucket's). A bucket that holds a count of
# refusals lives a day, so that the next audit row of its key can still say how many
# went unwritten.
_LUA = """
-- atrium rate buckets (bindings/ratelimit.py)
local now = tonumber(ARGV[1])
local function take(key, burst, rate)
  local state = redis.call('HMGET', key, 'tokens', 'updated', 'skipped')
  local tokens = tonumber(state[1]) or burst
  local updated = tonumber(state[2]) or now
  local skipped = tonumber(state[3]) or 0
  local elapsed = math.max(0, now - updated)
  tokens = math.min(burst, tokens + elapsed * rate)
  local ttl = math.ceil(burst / math.max(rate, 0.001)) + 1
  if tokens >= 1 then
    redis.call('HSET', key, 'tokens', tokens - 1, 'updated', now, 'skipped', 0)
    redis.call('EXPIRE', key, ttl)
    return 1, 0, skipped
  end
  local wait = -1
  if rate > 0 then wait = math.ceil((1 - tokens) / rate * 1000) end
  redis.call('HSET', key, 'tokens', tokens, 'updated', now, 'skipped', skipped + 1)
  redis.call('EXPIRE', key, math.max(ttl, 86400))
  return 0, wait, skipped + 1
end
local n = #KEYS / 2
local skipped = 0
for i = 1, n do
  local allowed, wait, s = take(KEYS[i], tonumber(ARGV[2 + 2 * i]), tonumber(ARGV[3 + 2 * i]))
  if allowed == 0 then
    if tonumber(ARGV[2]) < 0 then return {i, wait, s, 0, 0} end
    local gate, _, gate_skipped = take(KEYS[n + i], tonumber(ARGV[2]), tonumber(ARGV[3]))
    return {i, wait, s, gate, gate_skipped}
  end
  skipped = s
end
return {0, 0, skipped, 0, 0}
"""
_LUA_SHA = hashlib.sha1(_LUA.encode()).hexdigest()

KEY_PREFIX = "atrium:rate:"
_key_prefix = KEY_PREFIX  # reset_for_tests() gives each test a namespace of its own


@dataclass(frozen=True)
class _Take:
    kind: str
    key: str  # the bucket's key in the store
    audit_key: str  # its refusals' audit gate
    limit: Limit


def _takes(buckets: Sequence[tuple[str, str]], audit: bool) -> tuple[list[_Take], Limit | None]:
    configured = limits()
    takes = [
        _Take(
            kind,
            f"{_key_prefix}{kind}:{key}",
            f"{_key_prefix}{RATE_LIMITED_AUDIT}:{kind}:{key}",
            configured[kind],
        )
        for kind, key in buckets
    ]
    return takes, configured[RATE_LIMITED_AUDIT] if audit else None


def _script_args(takes: list[_Take], audit: Limit | None, now: float) -> list[Any]:
    keys = [t.key for t in takes] + [t.audit_key for t in takes]
    argv: list[Any] = [now, *((audit.burst, audit.rate) if audit else (-1, 0))]
    for t in takes:
        argv += [t.limit.burst, t.limit.rate]
    return [_LUA_SHA, len(keys), *keys, *argv]


def _refused(verdict: Verdict, kind: str, audit: bool, audit_skipped: int) -> Verdict:
    return dataclasses.replace(verdict, kind=kind, audit=audit, refused_since_audit=audit_skipped)


def _verdict(raw: list[Any], takes: list[_Take]) -> Verdict:
    refused, wait_ms, skipped, audit, audit_skipped = (int(x) for x in raw)
    if not refused:
        return Verdict(True, 0.0, skipped=skipped)
    wait = math.inf if wait_ms < 0 else wait_ms / 1000
    return _refused(
        Verdict(False, wait, skipped=skipped), takes[refused - 1].kind, bool(audit), audit_skipped
    )


# Clients by Redis URL (and, for asyncio, by event loop: a connection belongs to its loop).
_async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, Any]] = (
    weakref.WeakKeyDictionary()
)
_sync_clients: dict[str, Any] = {}
_local = _LocalStore()


def _redis_url() -> str:
    return getattr(settings, "REDIS_URL", "") or ""


def _async_client(url: str) -> Any:
    clients = _async_clients.setdefault(asyncio.get_running_loop(), {})
    client = clients.get(url)
    if client is None:
        import redis.asyncio as aioredis

        client = clients[url] = aioredis.Redis.from_url(url)
    return client


def _sync_client(url: str) -> Any:
    client = _sync_clients.get(url)
    if client is None:
        import redis

        client = _sync_clients[url] = redis.Redis.from_url(url)
    return client


def _now() -> float:
    # Wall clock, not monotonic: buckets are shared between processes (and machines).
    return time.time()


def take_all(buckets: Sequence[tuple[str, str]], *, audit: bool = True) -> Verdict:
    """Take a token from each ``(kind, key)`` bucket, in order, until one refuses (sync
    callers; see the module's docstring). Allowed: ``skipped`` is the last bucket's.
    Refused: the refusing bucket's verdict, its ``kind``, and (``audit``) whether to audit
    it: a token from the `RATE_LIMITED_AUDIT` gate of that bucket."""
    takes, gate = _takes(buckets, audit)
    url = _redis_url()
    if not url:
        return _local.take_all(takes, gate, _now())
    client = _sync_client(url)
    args = _script_args(takes, gate, _now())
    try:
        try:
            raw = client.execute_command("EVALSHA", *args)
        except NoScriptError:  # a new or restarted Redis, or SCRIPT FLUSH: send it once
            client.script_load(_LUA)
            raw = client.execute_command("EVALSHA", *args)
    except _UNREACHABLE as exc:
        return _unlimited(takes, exc)
    return _verdict(raw, takes)


async def take_all_async(buckets: Sequence[tuple[str, str]], *, audit: bool = True) -> Verdict:
    """`take_all` for async callers (no thread hop): one Redis round trip."""
    takes, gate = _takes(buckets, audit)
    url = _redis_url()
    if not url:
        return _local.take_all(takes, gate, _now())
    client = _async_client(url)
    args = _script_args(takes, gate, _now())
    try:
        try:
            raw = await client.execute_command("EVALSHA", *args)
        except NoScriptError:
            await client.script_load(_LUA)
            raw = await client.execute_command("EVALSHA", *args)
    except _UNREACHABLE as exc:
        return _unlimited(takes, exc)
    return _verdict(raw, takes)


def take(kind: str, key: str) -> Verdict:
    """Take one token from the ``kind`` bucket of ``key`` (sync callers). A refusal says
    whether to audit it (the `RATE_LIMITED_AUDIT` gate of the flooded bucket)."""
    return take_all([(kind, key)])


async def take_async(kind: str, key: str) -> Verdict:
    """Take one token from the ``kind`` bucket of ``key`` (async callers: no thread hop)."""
    return await take_all_async([(kind, key)])


def audit_gate(kind: str, key: str) -> AuditGate:
    """Whether a refusal of ``key`` gets its audit row now: a token from the ``kind``
    bucket of ``key``. Refused, the refusal is only counted; the next row written for the
    key carries the count (``skipped``)."""
    verdict = take_all([(kind, key)], audit=False)
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


def _unlimited(takes: list[_Take], exc: Exception) -> Verdict:
    kinds = ", ".join(t.kind for t in takes)
    log.warning("rate limit %s not applied: Redis unreachable (%s)", kinds, exc)
    return Verdict(allowed=True, retry_after=0.0)


def reset_for_tests() -> None:
    """Start every bucket full: empty the local store, and move this process's Redis keys
    to a fresh namespace (the suite's processes share one Redis database, and a test
    database numbers its rows from 1 again, so one test's drained bucket would otherwise
    meet the next test, or the next run within the keys' expiry)."""
    global _key_prefix
    _local.reset()
    _key_prefix = f"{KEY_PREFIX}test-{uuid.uuid4().hex[:12]}:"
