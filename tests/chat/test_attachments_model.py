"""An attached image and a PDF reach the model in each provider's own format (issue 26):
a member's socket posts a message with two stored files, the agent loop's real request
goes to the fake OpenAI-compatible and Anthropic servers, and what they recorded is read."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async

from chat.media.attachments import UploadTicket
from chat.media.models import MediaAsset
from chat.media.services import media_asset_persist
from chat.media.uploads import StagingWriter
from tests.chat import attachment_samples as samples
from tests.chat.fake_llm import FakeLLM, anthropic_text, openai_text
from tests.conftest import next_frame, open_socket

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

PDF_LINES = ("Quarterly report", "Revenue rose 12 percent")


@pytest.fixture(autouse=True)
def media_settings(settings, tmp_path: Path):
    settings.MEDIA_ROOT = str(tmp_path / "media")
    settings.MEDIA_STAGING_ROOT = str(tmp_path / "staging")


@pytest.fixture(autouse=True)
async def close_connections():
    yield
    from mcp_bridge import gateway

    await gateway.close_all()


def stored_file(personas, name: str, data: bytes) -> MediaAsset:
    """Upload as the member would (the body endpoint's writer), then persist it."""
    ticket = UploadTicket(
        thread_id=personas.thread.pk,
        user_id=personas.member.pk,
        filename=name,
        size=len(data),
        key=name.encode().hex().ljust(32, "0")[:32],
    )
    writer = StagingWriter(ticket)
    writer.account(data)
    writer.write(data)
    asset_id = writer.finish()["attachment"]["asset"]["id"]
    assert media_asset_persist(asset_id=asset_id) == "ready"
    return MediaAsset.objects.get(pk=asset_id)


def use_provider(personas, kind: str, llm: FakeLLM) -> None:
    workspace = personas.workspace
    workspace.provider = kind
    workspace.model = "fake-model"
    workspace.provider_base_url = llm.base_url
    workspace.provider_api_key = "sk-test"
    workspace.save()


def _done(frame) -> bool:
    data = frame.get("data") or {}
    return (
        frame.get("type") == "event"
        and frame.get("kind") == "message"
        and data.get("role") == "assistant"
        and data.get("status") == "complete"
    )


async def post_with_files(personas, ws_connect, llm: FakeLLM, kind: str):
    png = samples.png(320, 200)
    image = await sync_to_async(stored_file)(personas, "chart.png", png)
    pdf = await sync_to_async(stored_file)(
        personas, "report.pdf", samples.pdf_with_text(*PDF_LINES)
    )
    await sync_to_async(use_provider)(personas, kind, llm)
    socket = await open_socket(ws_connect, personas.member, personas.thread)
    await socket.send_json_to(
        {
            "type": "message.post",
            "rid": "r1",
            "text": "What do these say?",
            "attachments": [image.pk, pdf.pk],
        }
    )
    await next_frame(socket, _done, limit=200)
    await socket.disconnect()
    return png


async def test_openai_gets_an_image_url_part_and_the_pdf_text(personas, ws_connect):
    with FakeLLM("openai") as llm:
        llm.push(openai_text("A chart and a report."))
        png = await post_with_files(personas, ws_connect, llm, "openai")
    user = [m for m in llm.requests[0].body["messages"] if m["role"] == "user"][-1]
    text, picture = user["content"]
    assert text["type"] == "text" and text["text"].startswith("What do these say?")
    assert "Attached image “chart.png” (image/png" in text["text"]
    assert (
        "Attached file “report.pdf” (application/pdf" in text["text"] and "1 pages" in text["text"]
    )
    assert "Quarterly report" in text["text"] and "Revenue rose 12 percent" in text["text"]
    assert picture == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64," + base64.b64encode(png).decode()},
    }


async def test_anthropic_gets_an_image_block_and_the_pdf_text(personas, ws_connect):
    with FakeLLM("anthropic") as llm:
        llm.push(anthropic_text("A chart and a report."))
        png = await post_with_files(personas, ws_connect, llm, "anthropic")
    user = llm.requests[0].body["messages"][-1]
    assert user["role"] == "user"
    text, picture = user["content"]
    assert text["type"] == "text" and "Quarterly report" in text["text"]
    assert picture == {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": "image/png",
            "data": base64.b64encode(png).decode(),
        },
    }


async def test_a_long_text_file_is_cut_to_the_budget_with_a_visible_note(
    personas, ws_connect, settings
):
    settings.ATRIUM_ATTACH_TEXT_BUDGET = 100
    long = await sync_to_async(stored_file)(personas, "log.txt", b"line of log\n" * 500)
    assert long.text_truncated
    with FakeLLM("openai") as llm:
        llm.push(openai_text("Long."))
        await sync_to_async(use_provider)(personas, "openai", llm)
        socket = await open_socket(ws_connect, personas.member, personas.thread)
        await socket.send_json_to(
            {"type": "message.post", "rid": "r1", "text": "", "attachments": [long.pk]}
        )
        await next_frame(socket, _done, limit=200)
        await socket.disconnect()
    content = llm.requests[0].body["messages"][-1]["content"]
    assert isinstance(content, str)  # no images: plain text content
    assert content.count("line of log") == 8  # 100 characters: 8 whole lines and "line"
    assert "[Atrium: the text was cut to the first 100 characters.]" in content
