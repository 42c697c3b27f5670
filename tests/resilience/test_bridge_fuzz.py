"""Property-based fuzzing of view bridge requests (`view.request` / `view.notify`, DESIGN
§8.2, §8.9): arbitrary methods, params and tokens always get a clear answer — a result or
an error with a code and a message — never an exception, and nothing is stored that the
request was not entitled to store."""

from __future__ import annotations

import asyncio
import json
from importlib import import_module
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

pytestmark = [pytest.mark.django_db(transaction=True)]

KNOWN_METHODS = [
    "tools/call",
    "resources/read",
    "resources/list",
    "resources/templates/list",
    "prompts/list",
    "ui/message",
    "ui/update-model-context",
    "ui/open-link",
    "ui/request-display-mode",
    "ui/download-file",
    "atrium/setWidgetState",
    "ping",
    "notifications/message",
    "ui/notifications/size-changed",
]
STORING = {"tools/call", "ui/message", "atrium/setWidgetState", "ui/update-model-context"}

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
# Params shaped like the real ones often enough to get past the first checks.
params = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {},
        optional={
            "name": st.one_of(st.sampled_from(["echo", "show", "missing"]), json_values),
            "arguments": st.one_of(st.just({}), st.just({"text": "hi"}), json_values),
            "uri": st.one_of(st.just("ui://fuzz/view"), json_values),
            "url": st.one_of(
                st.sampled_from(["https://example.com", "javascript:alert(1)", "data:,x"]),
                json_values,
            ),
            "content": st.one_of(st.just([{"type": "text", "text": "from a view"}]), json_values),
            "mode": st.one_of(st.sampled_from(["inline", "fullscreen", "pip"]), json_values),
            "state": json_values,
            "contents": json_values,
            "structuredContent": json_values,
            "_compat": st.one_of(
                st.sampled_from(["legacy", "openai", "legacy-intent"]), json_values
            ),
        },
    ),
)
tokens = st.one_of(
    st.just("valid"),
    st.just("valid"),
    st.sampled_from(["valid", "other-thread", "other-user"]),
    st.text(max_size=80),
    json_values,
)


@pytest.fixture
def bridge(personas):
    """A view of a server that exists in the catalogue but cannot be started."""
    from bindings.services.bindings import binding_create
    from chat.app_view_bridge import sign_view_token
    from chat.models import ToolCall
    from mcp_bridge.services.catalogue import catalogue_apply
    from mcp_bridge.services.servers import server_add

    server = server_add(
        name="Fuzz", slug="fuzz", transport="stdio", command="/nonexistent/fuzz-mcp-server"
    )
    catalogue_apply(
        server=server,
        tools=[
            {
                "name": name,
                "inputSchema": {"type": "object"},
                "annotations": {"readOnlyHint": True},
                "_meta": {"ui": {"visibility": ["model", "app"]}},
            }
            for name in ("echo", "show")
        ],
    )
    binding = binding_create(server=server, workspace=personas.workspace)
    binding_create(server=server, workspace=personas.other_workspace)

    def view(thread, user):
        call = ToolCall.objects.create(
            thread=thread,
            server=server,
            binding=binding,
            tool_name="show",
            status="success",
            origin="user",
            requested_by=user,
        )
        return sign_view_token(call=call, user_id=user.pk)

    return {
        "valid": view(personas.thread, personas.member),
        "other-thread": view(personas.other_thread, personas.outsider),
        "other-user": view(personas.thread, personas.owner),
    }


def _counts(personas) -> dict[str, Any]:
    from chat.models import Message, Thread, ToolCall

    return {
        "messages": Message.objects.count(),
        "calls": ToolCall.objects.count(),
        "seq": Thread.objects.get(pk=personas.thread.pk).last_seq,
        "other_seq": Thread.objects.get(pk=personas.other_thread.pk).last_seq,
        "widget": list(ToolCall.objects.order_by("pk").values_list("widget_state", flat=True)),
    }


async def _send(personas, kind: str, msg: dict[str, Any]) -> dict[str, Any]:
    """Run one bridge message through the consumer's handler, as the consumer does (a
    frame holding unstorable text is refused before any handler)."""
    from django.conf import settings as django_settings

    from chat.realtime.frames import UNSTORABLE_REFUSED, frame_unstorable

    frame = {"type": kind, **msg}
    if frame_unstorable(json.dumps(frame), frame):
        error = {"code": "invalid_text", "message": UNSTORABLE_REFUSED}
        return {"type": "reply", "rid": "fuzz", "ok": False, "error": error}

    from chat.actions.app_views import DEFERRED
    from chat.actions.registry import HANDLERS, ActionContext, ActionError
    from chat.models import Membership
    from chat.selectors import SessionPin

    sent: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def send(payload: dict[str, Any]) -> None:
        await sent.put(payload)

    from channels.db import database_sync_to_async

    def member_and_session() -> tuple[Membership, SessionPin]:
        membership = Membership.objects.get(user=personas.member, workspace=personas.workspace)
        session = import_module(django_settings.SESSION_ENGINE).SessionStore()
        session.create()  # a live session, as a socket's
        user = personas.member
        return membership, SessionPin(
            user_id=user.pk, password=user.password, session_key=session.session_key
        )

    membership, pin = await database_sync_to_async(member_and_session)()
    ctx = ActionContext(
        user=personas.member,
        thread=personas.thread,
        membership=membership,
        capabilities={"interactiveToolUi"},
        channel_name="fuzz",
        send=send,
        pin=pin,
    )
    try:
        result = await HANDLERS[kind](ctx, {**msg, "rid": "fuzz"})
    except ActionError as exc:
        return {"type": "reply", "rid": "fuzz", "ok": False, "error": exc.to_dict()}
    if result is DEFERRED:
        return await asyncio.wait_for(sent.get(), timeout=30)
    return {"type": "reply", "rid": "fuzz", "ok": True, "result": result}


def _check_reply(reply: dict[str, Any]) -> None:
    assert reply["type"] == "reply" and isinstance(reply["ok"], bool), reply
    if reply["ok"]:
        assert isinstance(reply["result"], dict), reply
    else:
        error = reply["error"]
        assert isinstance(error["code"], str) and error["code"], reply
        assert isinstance(error["message"], str) and error["message"], reply
        assert error["code"] != "internal_error", reply


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    method=st.one_of(
        st.sampled_from(KNOWN_METHODS),
        st.sampled_from(KNOWN_METHODS),
        st.sampled_from(KNOWN_METHODS),
        st.text(max_size=30),
        json_values,
    ),
    params=params,
    token=tokens,
    notify=st.booleans(),
)
@example(method="tools/call", params={"name": "echo", "arguments": {}}, token="valid", notify=False)
@example(method="tools/call", params={"name": "missing"}, token="valid", notify=False)
@example(method="tools/call", params={"name": "echo"}, token="other-user", notify=False)
@example(method="ui/message", params={"content": "hi"}, token="valid", notify=False)
@example(method="atrium/setWidgetState", params={"state": {"a": 1}}, token="valid", notify=False)
@example(method="resources/read", params={"uri": "ui://fuzz/view"}, token="valid", notify=False)
# Found by this test on PostgreSQL: U+0000 in a key reached a jsonb column (DataError).
@example(
    method="ui/update-model-context",
    params={"content": {"011\x00": None}},
    token="valid",
    notify=False,
)
@example(
    method="ui/update-model-context",
    params={"content": {"lone \ud800": None}},
    token="valid",
    notify=False,
)
def test_view_requests_always_get_a_clear_answer_and_store_only_what_they_may(
    personas, bridge, method, params, token, notify
):
    from channels.db import database_sync_to_async  # noqa: F401 — loaded for the handlers

    before = _counts(personas)
    real_token = bridge.get(token, token) if isinstance(token, str) else token
    message = {"token": real_token, "method": method, "params": params}
    reply = async_to_sync(_send)(personas, "view.notify" if notify else "view.request", message)
    _check_reply(reply)
    label = token if isinstance(token, str) and token in bridge else "junk-token"
    event(f"{label}: {reply['ok'] or reply['error']['code']}")
    after = _counts(personas)

    assert after["other_seq"] == before["other_seq"]  # another thread is never touched
    entitled = token == "valid" and isinstance(method, str) and method in STORING and not notify
    # (a refused tools/call is still recorded: the call row says it was refused)
    if (not entitled or not reply["ok"]) and not (entitled and method == "tools/call"):
        assert after == before, (method, reply)
    if not isinstance(params, dict) or token != "valid":
        assert after["messages"] == before["messages"]


def test_invalid_tokens_are_audited(personas, bridge):
    from audit.models import AuditEvent

    before = AuditEvent.objects.filter(reason="invalid_token").count()
    reply = async_to_sync(_send)(
        personas, "view.request", {"token": "forged", "method": "ping", "params": {}}
    )
    assert reply["ok"] is False and reply["error"]["code"] == "invalid_token"
    assert AuditEvent.objects.filter(reason="invalid_token").count() == before + 1
