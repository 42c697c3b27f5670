"""The pure rules behind issue 13: the server_disabled policy rule, the token bucket, the
Markdown escaping of server text and RE2 for schema patterns."""

from __future__ import annotations

import time

import pytest

from bindings import policy, policy_engine
from bindings.ratelimit import Limit, refill_and_take
from chat.markdown import code_span, escape_markdown, render_markdown
from mcp_bridge.errors import InvalidArguments
from mcp_bridge.schema import validate_arguments


def _decide(server_enabled: bool) -> policy.PolicyDecision:
    return policy_engine.decide(
        actor=policy.Actor(kind="user", user_id=1, role="owner"),
        thread=policy.ThreadRef(id=1, workspace_id=1),
        binding=policy.BindingSnap(
            id=1, server_id=1, scope="workspace", workspace_id=1, server_enabled=server_enabled
        ),
        tool=policy.ToolSnap(server_id=1, name="t", annotations={"readOnlyHint": True}),
        policy=None,
        action=policy.Action(kind="user_tool_call", server_id=1, tool_name="t"),
    )


def test_a_disabled_server_denies_whatever_the_binding_says() -> None:
    assert _decide(True).allowed
    denied = _decide(False)
    assert (denied.outcome, denied.reason_code) == (policy.Outcome.DENY, "server_disabled")


def test_the_token_bucket_refills_at_its_rate_up_to_its_burst() -> None:
    limit = Limit(burst=2, rate=1.0)
    tokens, now = 2.0, 100.0
    allowed = []
    for _ in range(3):
        ok, tokens, wait = refill_and_take(tokens, now, now, limit)
        allowed.append(ok)
    assert allowed == [True, True, False] and wait == pytest.approx(1.0)
    ok, tokens, _ = refill_and_take(tokens, now, now + 1.0, limit)
    assert ok
    ok, tokens, _ = refill_and_take(tokens, now, now + 1000.0, limit)
    assert ok and tokens == pytest.approx(1.0)  # never more than the burst
    assert refill_and_take(0.0, now, now, Limit(burst=1, rate=0.0))[2] == float("inf")


@pytest.mark.parametrize(
    "text",
    ["x` [phish](https://evil.example) **b** <img src=x>", "*a* _b_ ~c~ # h\n- list", "\\`"],
)
def test_escaped_server_text_renders_as_that_text(text: str) -> None:
    html = render_markdown(f"- {code_span('srv.t`o``ol')} — {escape_markdown(text)}")
    assert "<a " not in html and "<em>" not in html and "<strong>" not in html
    assert "<img" not in html and "<h1>" not in html
    assert "<code>srv.t`o``ol</code>" in html


def test_schema_patterns_run_in_linear_time() -> None:
    schema = {
        "type": "object",
        "properties": {"text": {"type": "string", "pattern": "^(a+)+$"}},
        "patternProperties": {"^(x+)+$": {"type": "integer"}},
        "additionalProperties": False,
    }
    started = time.perf_counter()
    with pytest.raises(InvalidArguments) as raised:
        validate_arguments({"text": "a" * 5000 + "b", "x" * 5000 + "y": 1}, schema)
    assert time.perf_counter() - started < 0.5
    assert any("does not match" in p for p in raised.value.problems)
    assert validate_arguments({"text": "aaa", "xx": 3}, schema) == []
    with pytest.raises(InvalidArguments):
        validate_arguments({"xx": "not an integer"}, schema)
    # RE2 cannot run a backreference: that keyword is not applied (the server validates).
    assert validate_arguments({"t": "ab"}, {"properties": {"t": {"pattern": "(a)\\1"}}}) == []
