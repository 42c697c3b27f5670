"""What the model sees in a turn (``chat.agent.context``): tool descriptions, the views'
model context, tool results and the thread's history within their size limits."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.utils import timezone

from chat.agent import context
from chat.agent.context import _compact, _history, _Names, _provider_tool, _size, _system_prompt
from chat.models import ToolCall
from chat.providers.base import AssistantTurn, ToolResult, ToolUse, UserTurn
from chat.services.turns import ASSISTANT_LABEL
from tests import factories


def _offered(**tool: object) -> SimpleNamespace:
    server = SimpleNamespace(name="Board", slug="board")
    fields = {"name": "add", "title": "", "description": "", "input_schema": {}, **tool}
    return SimpleNamespace(tool=SimpleNamespace(server=server, **fields))


def test_a_tool_is_described_with_its_server_title_and_an_object_schema():
    tool = _provider_tool(
        "board__add",
        _offered(
            title="Add card",
            description="Adds a card to the board.",
            input_schema={"$schema": "https://json-schema.org/x", "required": ["title"]},
        ),
    )
    assert tool.name == "board__add"
    assert tool.description == "[Board] Add card. Adds a card to the board."
    assert tool.parameters == {"required": ["title"], "type": "object", "properties": {}}
    bare = _provider_tool("board__add", _offered(input_schema=["not", "a", "schema"]))
    assert bare.description == "[Board] add"
    assert bare.parameters == {"type": "object", "properties": {}}
    long = _provider_tool("board__add", _offered(description="x" * 5000))
    assert len(long.description) == context.MAX_DESCRIPTION_CHARS


def test_names_fall_back_to_the_wire_name_of_a_tool_no_longer_offered():
    names = _Names({("board", "add"): "board__add_2"})
    assert names.name("board", "add") == "board__add_2"
    assert names.name("board", "gone") == "board__gone"


def test_context_text_keeps_text_blocks_and_structured_content_within_its_limit():
    assert context.context_text(None) == ""
    assert context.context_text(["not a mapping"]) == ""
    assert context.context_text({"content": "plain"}) == "plain"
    # Other modalities are described (issue 27: the host declares them; chat/view_tools).
    assert context.context_text({"content": [{"type": "image", "data": "…"}, "b"]}) == (
        "[image: image]\nb"
    )
    long = context.context_text({"content": [{"type": "text", "text": "y" * 10_000}]})
    assert len(long) == context.MAX_CONTEXT_CHARS and long.endswith("…")


def test_compact_json_or_a_placeholder():
    assert _compact({"a": [1, 2]}, 100) == '{"a":[1,2]}'
    assert _compact({"a": "x" * 50}, 10) == '{"a":"xxx…'
    loop: dict[str, object] = {}
    loop["self"] = loop
    assert _compact(loop, 100) == "[structured data]"


@pytest.mark.parametrize(
    ("status", "error", "expected"),
    [
        ("cancelled", None, "The tool call was cancelled."),
        ("error", {"message": "boom"}, "The tool call failed: boom"),
        ("error", None, "The tool call failed: unknown error."),
        ("rejected", None, "The tool call was not run: it was refused."),
        ("awaiting_approval", None, "The tool call is still waiting for a person's approval."),
        ("running", None, "The tool call did not finish (status: running)."),
    ],
)
def test_a_call_without_a_result_tells_the_model_why(status, error, expected):
    assert context.result_for_model(ToolCall(status=status, error=error)) == (expected, True)


def test_a_result_is_cut_to_its_limit_and_an_empty_one_is_named():
    empty = ToolCall(status="success", result={"parts": []})
    assert context.result_for_model(empty) == ("(The tool returned no content.)", False)
    failed = ToolCall(status="error", result={"parts": [{"type": "text", "text": "bad"}]})
    assert context.result_for_model(failed) == ("bad", True)
    big = ToolCall(status="success", result={"parts": [{"type": "text", "text": "z" * 20_000}]})
    text, _ = context.result_for_model(big)
    assert len(text) == context.MAX_TOOL_RESULT_CHARS and text.endswith("…")


def test_size_counts_text_and_tool_arguments():
    assert _size(UserTurn("hello")) == 5
    turn = AssistantTurn(text="ab", tool_uses=(ToolUse(id="1", name="t", arguments={"k": 1}),))
    assert _size(turn) == 2 + len('{"k": 1}')


def test_history_reads_the_thread_as_the_model_sees_it(personas):
    thread, member, owner = personas.thread, personas.member, personas.owner
    server = factories.McpServerFactory(name="Board", slug="board")
    first = factories.MessageFactory(thread=thread, author=member, text="hi there")
    factories.MessageFactory(thread=thread, author=owner, text="/call board.add {}")

    def add(title: str, returned: str, **fields: object) -> None:
        factories.ToolCallFactory(
            thread=thread,
            server=server,
            tool_name="add",
            arguments={"title": title},
            result={"parts": [{"type": "text", "text": returned}]},
            **fields,
        )

    add("A", "added", origin="user", requested_by=owner)
    answer = factories.MessageFactory(
        thread=thread, role="assistant", author_label=ASSISTANT_LABEL, text="Done."
    )
    add("B", "added B", origin="model", message=answer, provider_call_id="call_0")
    factories.MessageFactory(
        thread=thread, role="assistant", author_label=ASSISTANT_LABEL, status="error", text="x"
    )
    newest = factories.MessageFactory(thread=thread, author=owner, text="thanks")

    items, several, seen = _history(thread, _Names({("board", "add"): "board__add"}))

    assert several and seen == newest.pk and first.pk < seen
    assert items == [
        UserTurn("marco: hi there"),
        UserTurn('[olivia ran the tool board.add with {"title":"A"}; it returned:]\nadded'),
        AssistantTurn(
            text="Done.",
            tool_uses=(ToolUse(id="call_0", name="board__add", arguments={"title": "B"}),),
        ),
        ToolResult(tool_use_id="call_0", name="board__add", text="added B", is_error=False),
        UserTurn("olivia: thanks"),
    ]


def test_history_keeps_the_newest_whole_blocks_within_its_budget(personas, monkeypatch):
    thread = personas.thread
    for text in ("a" * 40, "b" * 40, "c" * 40):
        factories.MessageFactory(thread=thread, author=personas.member, text=text)
    monkeypatch.setattr(context, "MAX_HISTORY_CHARS", 90)
    items, several, _ = _history(thread, _Names())
    assert not several
    assert items == [UserTurn("b" * 40), UserTurn("c" * 40)]
    monkeypatch.setattr(context, "MAX_HISTORY_CHARS", 10)  # the newest block always stays
    assert _history(thread, _Names())[0] == [UserTurn("c" * 40)]


def test_the_system_prompt_carries_the_views_latest_model_context(personas):
    thread = personas.thread
    server = factories.McpServerFactory(name="Board", slug="board")
    view = factories.ToolCallFactory(
        thread=thread,
        server=server,
        tool_name="show",
        model_context={"content": [{"type": "text", "text": "3 cards\nall done"}]},
        model_context_updated_at=timezone.now(),
    )
    prompt = _system_prompt(thread, several_people=True)
    assert prompt.startswith(context.DEFAULT_SYSTEM_PROMPT)
    assert '"Launch plan" of the workspace "Acme"' in prompt
    assert "each of their messages starts with its author's name" in prompt
    assert f"- The Board view of show (call {view.pk}) reports:\n  3 cards\n  all done" in prompt
    alone = _system_prompt(
        factories.ThreadFactory(workspace=personas.workspace), several_people=False
    )
    assert "author's name" not in alone and "reports:" not in alone


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ('{"a": ', "Expecting value"),
        ('{"n": ' + "9" * 5000 + "}", "too long or too deep"),
        ("[" * 100_000 + "]" * 100_000, "too long or too deep"),
        ("[1, 2]", "must be a JSON object"),
    ],
)
def test_model_arguments_that_are_not_an_object_are_refused_with_a_reason(raw, reason):
    from chat.agent.tools import _parse_arguments

    value, error = _parse_arguments(raw)
    assert value is None
    assert error is not None and reason in error and "the tool was not run" in error
