"""Rate buckets taken together (bindings.ratelimit.take_all): the buckets of a request in
one trip to the store, with the semantics the one-bucket-at-a-time code had.

The semantics tests run on whichever store the profile uses (the embedded dict; Redis in
the production profile, `make test-production`) and compare with a model of the old code
(`take_tokens` taking each bucket with its own script run, in order, up to the first
refusal, then the refused bucket's audit gate). The round-trip tests need Redis
(production profile) and count the commands with Redis's MONITOR.
"""

from __future__ import annotations

import hashlib
import secrets
import types
import uuid

import pytest
from django.conf import settings as django_settings

from bindings import ratelimit
from bindings.ratelimit import RATE_LIMITED_AUDIT, Limit, refill_and_take
from chat.actions.registry import take_tokens

LIMITS = {
    "t_first": (3, 0.5),
    "t_tight": (1, 0.25),
    "t_last": (3, 0.5),
    RATE_LIMITED_AUDIT: (1, 0.1),
}
BUCKETS = [("t_first", "7"), ("t_tight", "7"), ("t_last", "7")]


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch, settings) -> Clock:
    settings.ATRIUM_RATE_LIMITS = {**settings.ATRIUM_RATE_LIMITS, **LIMITS}
    fake = Clock()
    monkeypatch.setattr(ratelimit, "_now", fake)
    return fake


class OldCode:
    """The code before take_all, as a model: each bucket its own take, in order, stopping
    at the first refusal, whose audit gate (a bucket of its own) is taken next."""

    def __init__(self) -> None:
        self.buckets: dict[str, tuple[float, float, int]] = {}

    def _take(self, key: str, limit: Limit, now: float) -> tuple[bool, float, int]:
        tokens, updated, skipped = self.buckets.get(key, (float(limit.burst), now, 0))
        allowed, left, wait = refill_and_take(tokens, updated, now, limit)
        self.buckets[key] = (left, now, 0 if allowed else skipped + 1)
        return allowed, wait, skipped if allowed else skipped + 1

    def take_tokens(self, buckets: list[tuple[str, str]], now: float) -> tuple:
        limits = {k: Limit(*v) for k, v in LIMITS.items()}
        for kind, key in buckets:
            allowed, wait, skipped = self._take(f"{kind}:{key}", limits[kind], now)
            if not allowed:
                gate, _, gate_skipped = self._take(
                    f"{RATE_LIMITED_AUDIT}:{kind}:{key}", limits[RATE_LIMITED_AUDIT], now
                )
                return (False, kind, wait, skipped, gate, gate_skipped)
        return (True, "", 0.0, 0, False, 0)


def _outcome(verdict: ratelimit.Verdict) -> tuple:
    if verdict.allowed:
        return (True, "", 0.0, 0, False, 0)
    return (
        False,
        verdict.kind,
        # Redis counts the wait in whole ms, rounded up (as the one-bucket script did).
        pytest.approx(verdict.retry_after, abs=0.0011),
        verdict.skipped,
        verdict.audit,
        verdict.refused_since_audit,
    )


def _stored(key: str) -> tuple[float, int] | None:
    """(tokens, refusals counted) of a bucket, from the profile's store."""
    if django_settings.REDIS_URL:
        import redis

        raw = redis.Redis.from_url(django_settings.REDIS_URL).hgetall(ratelimit._key_prefix + key)
        if not raw:
            return None
        return round(float(raw[b"tokens"]), 6), int(raw[b"skipped"])
    found = ratelimit._local.buckets.get(ratelimit._key_prefix + key)
    return None if found is None else (round(found[0], 6), found[2])


def test_a_refusal_keeps_the_tokens_taken_before_it_and_leaves_the_buckets_after_it(clock):
    assert ratelimit.take_all(BUCKETS).allowed
    refused = ratelimit.take_all(BUCKETS)
    assert not refused.allowed and refused.kind == "t_tight"
    assert refused.retry_after == pytest.approx(4.0)  # (1 - 0 tokens) / 0.25 a second
    assert refused.skipped == 1 and refused.audit and refused.refused_since_audit == 0
    assert _stored("t_first:7") == (1.0, 0)  # two taken: the refusal does not give it back
    assert _stored("t_tight:7") == (0.0, 1)  # the refusal counted
    assert _stored("t_last:7") == (2.0, 0)  # one taken: the refused request did not touch it
    assert _stored(f"{RATE_LIMITED_AUDIT}:t_tight:7") == (0.0, 0)  # its audit gate taken
    assert _stored(f"{RATE_LIMITED_AUDIT}:t_first:7") is None


def test_take_all_answers_and_stores_what_the_old_code_did_over_a_flood(clock):
    old = OldCode()
    steps = [0, 0, 0, 0.1, 1, 0, 0, 3, 0, 0, 0, 10, 0, 0.5, 0, 0, 0, 0, 4, 0, 0]
    for n, dt in enumerate(steps):
        clock.now += dt
        buckets = BUCKETS if n % 3 else BUCKETS[::-1]  # the order matters: both orders
        expected = old.take_tokens(buckets, clock.now)
        assert _outcome(ratelimit.take_all(buckets)) == expected, n
    for key, (tokens, _, skipped) in old.buckets.items():
        assert _stored(key) == (round(tokens, 6), skipped), key


@pytest.mark.django_db  # database_sync_to_async checks the connection first
async def test_take_tokens_audits_the_refusing_bucket_once_per_flood(clock, monkeypatch):
    recorded: list[dict] = []
    monkeypatch.setattr("chat.actions.registry.rate_limit_record", lambda **kw: recorded.append(kw))
    ctx = types.SimpleNamespace(user=None, thread=types.SimpleNamespace(workspace_id=1, pk=2))
    verdicts = [await take_tokens(ctx, BUCKETS) for _ in range(5)]
    # t_tight refuses the 2nd and 3rd (t_first's tokens taken), then t_first is empty.
    assert [v.kind for v in verdicts] == ["", "t_tight", "t_tight", "t_first", "t_first"]
    rows = [(r["bucket"], r["refused_since_last"]) for r in recorded]
    assert rows == [("t_tight", 0), ("t_first", 0)]  # one row per flooded bucket
    clock.now += 10  # the gates' tokens are back, and every bucket's
    assert (await take_tokens(ctx, BUCKETS)).allowed
    assert (await take_tokens(ctx, BUCKETS)).kind == "t_tight"
    rows = [(r["bucket"], r["refused_since_last"]) for r in recorded]
    assert rows[2:] == [("t_tight", 1)]  # the 3rd request's refusal went unwritten


# ---- through real Redis: one round trip ------------------------------------------------------


@pytest.fixture
def redis_monitor():
    """Redis's MONITOR feed, and a function that returns the commands clients sent since the
    previous call (not those run inside scripts): up to a sentinel this fixture sends."""
    if not django_settings.REDIS_URL:
        pytest.skip("needs Redis: the production profile (make test-production)")
    import redis

    client = redis.Redis.from_url(django_settings.REDIS_URL)
    with client.monitor() as monitor:

        def sent() -> list[list[str]]:
            sentinel = f"sentinel-{uuid.uuid4().hex}"
            client.echo(sentinel)
            commands = []
            while True:
                entry = monitor.next_command()
                if sentinel in entry["command"]:
                    return commands
                if entry.get("client_type") != "lua":
                    commands.append(entry["command"].split())

        sent()  # the feed runs from here
        yield sent


def _ours(commands: list[list[str]]) -> list[str]:
    """The commands of this test's buckets (other tests may share the Redis server)."""
    marks = (ratelimit._key_prefix, ratelimit._LUA_SHA, "atrium rate buckets")
    return [c[0].upper() for c in commands if any(m in " ".join(c) for m in marks)]


async def test_a_view_requests_buckets_are_one_round_trip_to_redis(redis_monitor, clock):
    ctx = types.SimpleNamespace(user=None, thread=types.SimpleNamespace(workspace_id=1, pk=2))
    assert (await take_tokens(ctx, BUCKETS)).allowed  # loads the script if Redis lacks it
    clock.now += 10
    redis_monitor()
    assert (await take_tokens(ctx, BUCKETS)).allowed
    assert _ours(redis_monitor()) == ["EVALSHA"]
    # A refusal (t_tight's one token is gone), its audit gate included: still one.
    refused = await ratelimit.take_all_async(BUCKETS)
    assert not refused.allowed and refused.kind == "t_tight"
    assert _ours(redis_monitor()) == ["EVALSHA"]


def test_a_redis_without_the_script_gets_it_once(redis_monitor, clock, monkeypatch):
    """NOSCRIPT (a restarted Redis, SCRIPT FLUSH): loaded and retried, then EVALSHA alone.
    A script this Redis has never seen stands in for a flush: SCRIPT FLUSH would drop the
    scripts of every other client of the shared server (parallel tests, Celery, Channels)."""
    unseen = ratelimit._LUA + f"\n-- {secrets.token_hex(8)}\n"
    monkeypatch.setattr(ratelimit, "_LUA", unseen)
    monkeypatch.setattr(ratelimit, "_LUA_SHA", hashlib.sha1(unseen.encode()).hexdigest())
    redis_monitor()
    assert ratelimit.take_all(BUCKETS).allowed
    assert _ours(redis_monitor()) == ["EVALSHA", "SCRIPT", "EVALSHA"]
    assert _stored("t_first:7") == (2.0, 0)  # one token a request, not one an attempt
    clock.now += 10
    redis_monitor()
    assert ratelimit.take_all(BUCKETS).allowed
    assert _ours(redis_monitor()) == ["EVALSHA"]
