"""App-provided tools and sampling from a view (issue 27): the pure rules
(chat/view_tools/naming.py), the registry of open views' tools and the consent rows
(chat/view_tools/services.py, chat/server_requests). The browser path:
tests/browser/test_view_sampling_apptools.py."""

from __future__ import annotations

import pytest

from audit.models import AuditEvent
from audit.types import AuditEventType
from chat.view_tools import naming
from tests import factories


def test_clean_tools_keeps_named_object_tools_within_bounds() -> None:
    kept = naming.clean_tools(
        {
            "tools": [
                {
                    "name": "count",
                    "description": "  How   many ",
                    "inputSchema": {"$schema": "x"},
                    "annotations": {"readOnlyHint": True, "evil": "x"},
                    "_meta": {"a": 1},
                },
                {"name": "count"},  # twice: dropped
                {"name": "bad name!"},
                {"name": "big", "inputSchema": {"p": "x" * (naming.MAX_SCHEMA_BYTES + 1)}},
                "nonsense",
            ]
        }
    )
    assert kept == [
        {
            "name": "count",
            "title": "",
            "description": "How many",
            "inputSchema": {"type": "object", "properties": {}},
            "annotations": {"readOnlyHint": True},
        }
    ]
    assert len(naming.clean_tools([{"name": f"t{i}"} for i in range(99)])) == naming.MAX_TOOLS


def test_wire_names_tell_view_tools_apart_and_skip_a_server_tools_name() -> None:
    assert naming.wire_name("board", "count") == "view__board__count"
    assert naming.is_view_wire_name("view__board__count")
    assert naming.description("Board", {"description": "Counts."}) == (
        "(from the Board view in this thread) Counts."
    )
    rows = [
        ("board", {"name": "count"}, "new"),
        ("board", {"name": "count"}, "old"),
        ("board", {"name": "x"}, "new"),
    ]
    picked = naming.pick_wire_names(rows, taken={"view__board__x"})
    assert list(picked) == ["view__board__count"] and picked["view__board__count"][1] == "new"


@pytest.mark.parametrize(
    ("version", "method"),
    [
        ("2026-01-26", "tools/call"),
        ("2026-09-draft", "ui/call-view-tool"),
        ("v2", "ui/call-view-tool"),
    ],
)
def test_host_to_view_call_follows_the_negotiated_version(version, method) -> None:
    assert naming.call_method(version) == method


def test_a_views_result_reaches_the_model_as_text_with_described_media() -> None:
    text, is_error = naming.result_text(
        {
            "content": [
                {"type": "text", "text": "Seven."},
                {"type": "image", "mimeType": "image/png", "data": "A" * 4096},
                {"type": "resource_link", "uri": "file:///b.csv", "name": "board"},
            ],
            "structuredContent": {"cards": 7},
            "_meta": {"secret": "never"},
        }
    )
    assert text.splitlines() == [
        "Seven.",
        "[image: image/png, about 3 KB]",
        "[resource link: file:///b.csv — board]",
        'structuredContent: {"cards": 7}',
    ]
    assert not is_error and "never" not in text
    assert naming.result_text({"content": [], "isError": True})[1] is True


@pytest.mark.django_db
def test_registered_tools_are_offered_to_their_member_only_and_withdrawn(personas) -> None:
    from chat.view_tools.services import (
        view_provider_tools,
        view_tools_register,
        view_tools_withdraw,
    )

    view = factories.ToolCallFactory(thread=personas.thread, requested_by=personas.owner)
    binding = factories.AppBindingFactory(server=view.server, workspace=personas.workspace)
    view.binding = binding
    view.save()
    auth, kept = view_tools_register(
        view=view,
        user=personas.owner,
        role="owner",
        thread=personas.thread,
        channel_name="chan-1",
        tools=[{"name": "count", "description": "Counts."}],
    )
    assert auth.allowed and [t["name"] for t in kept] == ["count"]
    offered = view_provider_tools(
        thread_id=personas.thread.pk, user_id=personas.owner.pk, taken=set()
    )
    assert [t.name for t in offered] == [f"view__{view.server.slug}__count"]
    assert offered[0].description.startswith(f"(from the {view.server.name} view in this thread)")
    assert (
        view_provider_tools(thread_id=personas.thread.pk, user_id=personas.member.pk, taken=set())
        == []
    )
    # A viewer's view provides nothing: the binding decides (and audits) the registration.
    denied, _ = view_tools_register(
        view=view,
        user=personas.viewer,
        role="viewer",
        thread=personas.thread,
        channel_name="chan-2",
        tools=[{"name": "count"}],
    )
    assert not denied.allowed
    assert view_tools_withdraw(channel_name="chan-1") == 1
    assert (
        view_provider_tools(thread_id=personas.thread.pk, user_id=personas.owner.pk, taken=set())
        == []
    )
    assert AuditEvent.objects.filter(event_type=AuditEventType.VIEW_TOOLS_WITHDRAWN).count() == 1
    assert AuditEvent.objects.filter(event_type=AuditEventType.VIEW_TOOLS_REGISTERED).count() == 2


@pytest.mark.django_db
def test_a_views_sampling_allowance_is_apart_from_its_servers(personas) -> None:
    from chat.server_requests.services import server_request_answer, server_request_open

    view = factories.ToolCallFactory(thread=personas.thread, requested_by=personas.owner)
    params = {
        "messages": [{"role": "user", "content": {"type": "text", "text": "Hi"}}],
        "maxTokens": 10,
        "_meta": {"secret": "s"},
    }
    opened = server_request_open(
        call_id=view.pk,
        kind="sampling",
        params=params,
        key="k1",
        expires_in=60,
        requester="app_view",
        for_user_id=personas.member.pk,
    )
    assert opened.allowance_id is None and "_meta" not in opened.row.params
    assert opened.row.for_user_id == personas.member.pk  # the member whose view asks
    server_request_answer(
        request_id=opened.row.pk, user=personas.member, answer="accept", remember="thread"
    )
    again = server_request_open(
        call_id=view.pk,
        kind="sampling",
        params=params,
        key="k2",
        expires_in=60,
        requester="app_view",
        for_user_id=personas.member.pk,
    )
    assert again.allowance_id is not None  # the app is allowed in this thread…
    by_server = server_request_open(
        call_id=view.pk, kind="sampling", params=params, key="k3", expires_in=60
    )
    assert by_server.allowance_id is None  # …its server is not


def test_images_from_a_view_reach_the_model_as_described_references() -> None:
    from chat.actions.app_views import _content_text
    from chat.agent.context import context_text

    image = {"type": "image", "mimeType": "image/png", "data": "A" * 2048}
    assert context_text({"content": [{"type": "text", "text": "Chart:"}, image]}) == (
        "Chart:\n[image: image/png, about 1 KB]"
    )
    assert _content_text([image, {"type": "text", "text": "Look"}]) == (
        "Look\n\n[image: image/png, about 1 KB]"
    )
    assert _content_text([image]) == ""  # still needs text to be posted


PNG_1PX = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def test_only_real_images_of_a_views_context_become_image_parts() -> None:
    context = {
        "content": [
            {"type": "image", "mimeType": "image/png", "data": PNG_1PX},
            {"type": "image", "mimeType": "image/jpeg", "data": PNG_1PX},  # not a JPEG
            {"type": "image", "mimeType": "image/svg+xml", "data": PNG_1PX},
            {"type": "image", "mimeType": "image/png", "data": "%%%"},
        ]
    }
    assert naming.context_images(context) == [("image/png", PNG_1PX)]


@pytest.mark.django_db
def test_a_views_context_image_reaches_the_model_as_an_image_part(personas) -> None:
    from django.utils import timezone

    from chat.agent.context import load_context
    from chat.models import Message
    from chat.providers.base import ImageInput, UserTurn

    factories.ToolCallFactory(
        thread=personas.thread,
        requested_by=personas.owner,
        model_context={"content": [{"type": "image", "mimeType": "image/png", "data": PNG_1PX}]},
        model_context_updated_at=timezone.now(),
    )
    Message.objects.create(thread=personas.thread, author=personas.owner, role="user", text="Look")
    ctx = load_context(thread_id=personas.thread.pk, user=personas.owner, role="owner")
    last = ctx.history[-1]
    assert isinstance(last, UserTurn) and last.images == (ImageInput("image/png", PNG_1PX),)
    assert "[image: image/png]" in ctx.system  # and described, for providers without images
