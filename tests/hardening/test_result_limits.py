"""Security issue 23, finding F7: a tool result's ``structuredContent``, its ``_meta`` and its
staged media are bounded (DESIGN §8.13). Past a limit an error part replaces the oversized
payload; the text, the other parts and the call's status are stored and broadcast as usual.

Through the real websocket path with a real MCP server over stdio
(tests/fixtures/mcp_servers/oversized.py), plus the pure seams.
"""

from __future__ import annotations

import json
import sys
from http import HTTPStatus

import pytest
from channels.db import database_sync_to_async

from mcp_bridge.normalize import normalize_tool_result, serialized_size
from tests import factories
from tests.conftest import ROOT_DIR, next_frame, open_socket, toolcall_event

OVERSIZED = ROOT_DIR / "tests" / "fixtures" / "mcp_servers" / "oversized.py"
MIB = 1024 * 1024


# ---- pure: the measure and the normalizer --------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        {},
        [],
        {"a": [1, 2.5, None, True, False, 'é"x\n\u2028', {"k": {}}], "b": []},
        {"nested": [[[[]]]], "unicode": "日本語 ✓", "n": -12345678901234567890},
        {"1": 2, "x": "\\"},
        # Counted without json.dumps per value (issue 28): its spellings must still match.
        [float("nan"), float("inf"), -float("inf"), 1e300, HTTPStatus.OK, "\ud800\x00"],
    ],
)
def test_serialized_size_is_the_compact_json_length(value):
    expected = len(json.dumps(value, separators=(",", ":")))
    assert serialized_size(value, 10**9) == expected
    assert serialized_size(value, expected) == expected
    if expected > 2:
        assert serialized_size(value, expected - 1) > expected - 1


def test_serialized_size_stops_at_the_limit():
    # One huge string or a long list is over at once, without walking or copying it.
    assert serialized_size({"a": "x" * (50 * MIB)}, MIB) > MIB
    assert serialized_size(list(range(MIB)), 1024) > 1024


def test_oversized_structured_content_and_meta_become_error_parts():
    raw = {
        "content": [{"type": "text", "text": "the summary"}],
        "structuredContent": {"rows": ["r" * 1000] * 2000},  # ~2 MB
        "_meta": {"blob": "m" * 300_000},
    }
    normalized = normalize_tool_result(raw, max_structured=MIB, max_meta=256 * 1024)
    assert normalized.structured is None and normalized.ui_meta is None
    assert normalized.parts[0] == {"type": "text", "text": "the summary"}
    codes = [p["code"] for p in normalized.parts if p["type"] == "error"]
    assert codes == ["structured_content_too_large", "meta_too_large"]
    assert "1 MB limit" in normalized.parts[1]["message"]
    assert normalized.is_error is False
    # Under the limits, both are kept.
    kept = normalize_tool_result(raw, max_structured=4 * MIB, max_meta=MIB)
    assert kept.structured == raw["structuredContent"] and kept.ui_meta == raw["_meta"]
    assert [p["type"] for p in kept.parts] == ["text"]


def test_staged_media_over_the_result_total_become_error_parts():
    staged: list[int] = []

    def stage(payload):
        staged.append(payload.size)
        return {"stagingKey": f"k{len(staged)}", "status": "staged", "size": payload.size}

    blob = "A" * (100 * 1024 // 3 * 4)  # 100 KiB decoded (all zero bits)
    block = {"type": "resource", "resource": {"uri": "file:///a.bin", "blob": blob,
                                               "mimeType": "application/octet-stream"}}  # fmt: skip
    raw = {"content": [{"type": "text", "text": "files"}, block, block, block]}
    normalized = normalize_tool_result(raw, stage=stage, max_staged_total=250 * 1024)
    assert len(staged) == 2
    assert [p["type"] for p in normalized.parts] == ["text", "file", "file", "error"]
    assert normalized.parts[-1]["code"] == "staged_media_limit"
    assert len(normalized.resources) == 2


# ---- through the websocket, a real server --------------------------------------------------

live = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture(autouse=True)
async def close_connections():
    yield
    from mcp_bridge import gateway

    await gateway.close_all()


@pytest.fixture
def oversized_server(personas, settings, tmp_path):
    settings.MEDIA_STAGING_ROOT = str(tmp_path / "staging")
    server = factories.McpServerFactory(
        name="Oversized", slug="oversized", command=sys.executable, args=[str(OVERSIZED)]
    )
    factories.AppBindingFactory(server=server, workspace=personas.workspace)
    return server


async def _call(ws_connect, personas, command: str, tool: str) -> tuple[dict, dict]:
    """Run ``command`` as the owner: the final event as the owner and a member saw it."""
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    member = await open_socket(ws_connect, personas.member, personas.thread)
    await owner.send_json_to({"type": "message.post", "text": command})
    seen_by_member = await next_frame(member, toolcall_event("success", tool))
    seen_by_owner = await next_frame(owner, toolcall_event("success", tool))
    await owner.disconnect()
    await member.disconnect()
    return seen_by_owner["data"], seen_by_member["data"]


async def _stored(call_id: int) -> dict:
    from chat.models import ToolCall

    return await database_sync_to_async(lambda: ToolCall.objects.get(pk=call_id).result)()


def _codes(result: dict) -> list[str]:
    return [p["code"] for p in result["parts"] if p["type"] == "error"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
async def test_a_3_mib_structured_content_is_an_error_part_and_the_text_stays(
    personas, oversized_server, ws_connect
):
    owner_view, member_view = await _call(
        ws_connect, personas, '/call oversized.huge_structured {"mib": 3}', "huge_structured"
    )
    for data in (owner_view, member_view, {"result": await _stored(owner_view["id"])}):
        result = data["result"]
        assert result["structured"] is None
        assert result["parts"][0] == {"type": "text", "text": "3072 rows, structured"}
        assert _codes(result) == ["structured_content_too_large"]
        assert "1 MB limit" in result["parts"][1]["message"]
        assert result["meta"]["success"] is True
    assert len(json.dumps(owner_view)) < 10_000  # the broadcast carries no 3 MiB


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
async def test_a_3_mib_result_meta_is_dropped_with_an_error_part(
    personas, oversized_server, ws_connect
):
    owner_view, member_view = await _call(
        ws_connect, personas, '/call oversized.huge_meta {"mib": 3}', "huge_meta"
    )
    for data in (owner_view, member_view, {"result": await _stored(owner_view["id"])}):
        result = data["result"]
        assert result["uiMeta"] is None
        assert result["structured"] == {"ok": True}
        assert result["parts"][0] == {"type": "text", "text": "metadata attached"}
        assert _codes(result) == ["meta_too_large"]
        assert "256 KB limit" in result["parts"][1]["message"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
async def test_staged_media_past_the_per_result_total_are_error_parts(
    personas, oversized_server, ws_connect, settings
):
    from chat.media.models import MediaAsset

    settings.ATRIUM_MEDIA_MAX_STAGED_PER_RESULT = 250 * 1024
    owner_view, _ = await _call(
        ws_connect, personas, '/call oversized.files {"count": 3, "kib": 100}', "files"
    )
    result = await _stored(owner_view["id"])
    assert [p["type"] for p in result["parts"]] == ["text", "file", "file", "error"]
    assert result["parts"][0]["text"] == "3 files follow"
    assert _codes(result) == ["staged_media_limit"]
    assert "250 KB limit for one tool result" in result["parts"][-1]["message"]
    assert await database_sync_to_async(MediaAsset.objects.count)() == 2


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
async def test_staged_media_past_the_servers_daily_total_are_error_parts(
    personas, oversized_server, ws_connect, settings
):
    from chat.media.models import MediaAsset

    settings.ATRIUM_MEDIA_MAX_STAGED_PER_SERVER_DAY = 250 * 1024
    command = '/call oversized.files {"count": 2, "kib": 100}'
    first, _ = await _call(ws_connect, personas, command, "files")
    assert _codes(await _stored(first["id"])) == []
    second, seen_by_member = await _call(ws_connect, personas, command, "files")
    for result in (await _stored(second["id"]), seen_by_member["result"]):
        assert [p["type"] for p in result["parts"]] == ["text", "error", "error"]
        assert result["parts"][0]["text"] == "2 files follow"
        assert _codes(result) == ["staged_media_daily_limit"] * 2
        assert "250 KB limit of media per day" in result["parts"][1]["message"]
        assert result["resources"] == []
        assert result["meta"]["success"] is True
    # Counted in the database: 200 KiB staged, 200 KiB refused.
    sizes = await database_sync_to_async(
        lambda: list(MediaAsset.objects.values_list("size", flat=True))
    )()
    assert sizes == [100 * 1024, 100 * 1024]
