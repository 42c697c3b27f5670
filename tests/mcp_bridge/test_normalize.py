"""Unit tests for mcp_bridge.normalize (canonical tool results, DESIGN §4)."""

from __future__ import annotations

import base64
import gc
import hashlib
import json
import time
import weakref
from typing import Any

import pytest

from mcp_bridge.normalize import (
    NormalizedResult,
    StagedPayload,
    build_sanitized_tool_result,
    model_content,
    normalize_tool_result,
    text_fallback,
)
from mcp_bridge.normalize import media as normalize_media

PNG_BYTES = b"\x89PNG\r\n\x1a\n" + b"\x00" * 24
PNG_B64 = base64.b64encode(PNG_BYTES).decode()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def errors(result: NormalizedResult) -> list[dict[str, Any]]:
    return [part for part in result.parts if part["type"] == "error"]


def error_codes(result: NormalizedResult) -> list[str]:
    return [part["code"] for part in errors(result)]


class RecordingStage:
    """A stage function that records what it was given and returns a descriptor."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, bytes, str | None, str | None]] = []

    def __call__(self, payload: StagedPayload) -> dict[str, Any]:
        self.calls.append(
            (payload.kind, payload.mime_type, payload.data, payload.filename, payload.source_uri)
        )
        number = len(self.calls)
        return {"assetId": f"a{number}", "status": "staged", "url": f"/media/a{number}"}


# --------------------------------------------------------------------------- result shape


def test_text_block_becomes_text_part() -> None:
    result = normalize_tool_result({"content": [{"type": "text", "text": "hello"}]})
    assert result.parts == [{"type": "text", "text": "hello"}]
    assert result.structured is None
    assert result.resources == []
    assert result.documents == {}
    assert result.is_error is False
    assert result.ui_meta is None


def test_to_dict_is_json_serializable_and_complete() -> None:
    result = normalize_tool_result(
        {
            "content": [{"type": "text", "text": "x"}],
            "structuredContent": {"a": 1},
            "isError": True,
            "_meta": {"k": "v"},
        }
    )
    as_dict = result.to_dict()
    assert set(as_dict) == {"parts", "structured", "resources", "documents", "isError", "uiMeta"}
    assert json.loads(json.dumps(as_dict)) == {
        "parts": [{"type": "text", "text": "x"}],
        "structured": {"a": 1},
        "resources": [],
        "documents": {},
        "isError": True,
        "uiMeta": {"k": "v"},
    }


@pytest.mark.parametrize(
    ("raw", "type_name"),
    [(None, "null"), ([1, 2], "array"), ("text", "string"), (42, "number"), (True, "boolean")],
)
def test_non_object_result_is_an_explicit_error(raw: Any, type_name: str) -> None:
    result = normalize_tool_result(raw)
    assert result.is_error is True
    assert result.parts == [
        {
            "type": "error",
            "code": "invalid_result",
            "message": f"The tool returned a {type_name} instead of a result object.",
        }
    ]


def test_content_that_is_not_a_list_is_reported() -> None:
    result = normalize_tool_result({"content": {"type": "text", "text": "x"}})
    assert error_codes(result) == ["invalid_content"]
    assert "not a list" in result.parts[0]["message"]


def test_missing_content_with_structured_only() -> None:
    result = normalize_tool_result({"structuredContent": {"rows": [1, 2]}})
    assert result.parts == []
    assert result.structured == {"rows": [1, 2]}


@pytest.mark.parametrize("block", [1, "text", None, [], 3.5])
def test_non_object_blocks_become_error_parts(block: Any) -> None:
    result = normalize_tool_result({"content": [{"type": "text", "text": "ok"}, block]})
    assert result.parts[0] == {"type": "text", "text": "ok"}
    assert result.parts[1]["code"] == "invalid_block"
    assert result.parts[1]["message"].startswith("Content block 2 is a ")


def test_unknown_block_type_is_skipped_with_a_clear_message() -> None:
    result = normalize_tool_result({"content": [{"type": "foo", "data": "x"}]})
    assert result.parts == [
        {
            "type": "error",
            "code": "unknown_block_type",
            "message": "Unknown content block type 'foo' was skipped.",
        }
    ]


def test_unknown_type_name_is_escaped_and_bounded() -> None:
    result = normalize_tool_result({"content": [{"type": "<script>\n" + "x" * 500}]})
    message = result.parts[0]["message"]
    assert "\n" not in message
    assert len(message) < 120


@pytest.mark.parametrize("block", [{"text": "no type"}, {"type": 5}, {"type": None}])
def test_block_without_a_type(block: dict[str, Any]) -> None:
    result = normalize_tool_result({"content": [block]})
    assert error_codes(result) == ["invalid_block"]


@pytest.mark.parametrize("text", [None, 5, ["a"], {"t": 1}])
def test_text_block_with_non_string_text(text: Any) -> None:
    result = normalize_tool_result({"content": [{"type": "text", "text": text}]})
    assert result.parts == [
        {"type": "error", "code": "missing_field", "message": "Text block 1 has no text."}
    ]


def test_is_error_must_be_a_real_boolean() -> None:
    assert normalize_tool_result({"isError": True}).is_error is True
    assert normalize_tool_result({"isError": "true"}).is_error is False
    assert normalize_tool_result({"isError": 1}).is_error is False
    assert normalize_tool_result({}).is_error is False


def test_text_is_cleaned_of_nul_and_lone_surrogates() -> None:
    result = normalize_tool_result({"content": [{"type": "text", "text": "a\x00b\ud800c"}]})
    assert result.parts[0]["text"] == "a\ufffdb\ufffdc"
    json.dumps(result.to_dict()).encode("utf-8")


def test_accepts_sdk_model_objects() -> None:
    import mcp.types as types

    raw = types.CallToolResult(
        content=[types.TextContent(type="text", text="hi")],
        structured_content={"a": 1},
        _meta={"m": 1},
    )
    result = normalize_tool_result(raw)
    assert result.parts == [{"type": "text", "text": "hi"}]
    assert result.structured == {"a": 1}
    assert result.ui_meta == {"m": 1}


# --------------------------------------------------------------------------- text budget


def test_ten_megabyte_text_is_truncated_with_a_notice() -> None:
    huge = "abcdefghij" * 1_048_576  # 10 MiB of text
    started = time.perf_counter()
    result = normalize_tool_result({"content": [{"type": "text", "text": huge}]})
    elapsed = time.perf_counter() - started
    assert elapsed < 2.0
    assert len(result.parts) == 2
    assert result.parts[0] == {"type": "text", "text": huge[:1_000_000]}
    notice = result.parts[1]
    assert notice["code"] == "text_truncated"
    assert notice["message"] == (
        f"Text output was too long: {len(huge) - 1_000_000:,} characters beyond the "
        "1,000,000-character limit were cut."
    )


def test_text_budget_spans_the_whole_result() -> None:
    raw = {
        "content": [
            {"type": "text", "text": "a" * 6},
            {"type": "text", "text": "b" * 6},
            {"type": "text", "text": "c" * 6},
            {"type": "image", "data": PNG_B64, "mimeType": "image/png"},
        ]
    }
    result = normalize_tool_result(raw, max_text=10)
    assert [p["type"] for p in result.parts] == ["text", "text", "error", "image"]
    assert result.parts[0]["text"] == "aaaaaa"
    assert result.parts[1]["text"] == "bbbb"
    assert result.parts[2]["code"] == "text_truncated"
    # 2 chars of "b" + all 6 of "c" were cut; reported once.
    assert "8 characters beyond the 10-character limit" in result.parts[2]["message"]
    assert error_codes(result) == ["text_truncated"]


# --------------------------------------------------------------------------- images / audio


def test_small_image_stays_inline_as_data_uri() -> None:
    result = normalize_tool_result(
        {"content": [{"type": "image", "data": PNG_B64, "mimeType": "IMAGE/PNG"}]}
    )
    assert result.parts == [
        {
            "type": "image",
            "mimeType": "image/png",
            "size": len(PNG_BYTES),
            "src": f"data:image/png;base64,{PNG_B64}",
        }
    ]
    assert result.resources == [
        {
            "uri": None,
            "kind": "image",
            "mimeType": "image/png",
            "size": len(PNG_BYTES),
            "status": "inline",
        }
    ]


def test_line_wrapped_base64_is_accepted_and_re_encoded_canonically() -> None:
    data = bytes(range(256)) * 4
    wrapped = "\n".join(b64(data)[i : i + 76] for i in range(0, len(b64(data)), 76))
    result = normalize_tool_result(
        {"content": [{"type": "image", "data": " " + wrapped + "\r\n", "mimeType": "image/png"}]}
    )
    src = result.parts[0]["src"]
    assert src == "data:image/png;base64," + b64(data)
    assert base64.b64decode(src.split(",", 1)[1]) == data


@pytest.mark.parametrize(
    "bad",
    [
        "not base64!!",
        "aGVsbG8",  # bad padding
        "aGVs-G8_",  # url-safe alphabet is not standard base64
        "aGVsbG8=\x00",
        "aGVsbG8=é",
        "====",
    ],
)
def test_invalid_base64_becomes_an_error_part(bad: str) -> None:
    result = normalize_tool_result(
        {"content": [{"type": "image", "data": bad, "mimeType": "image/png"}]}
    )
    assert result.parts == [
        {
            "type": "error",
            "code": "invalid_base64",
            "message": "Image block has invalid base64 data.",
        }
    ]
    assert result.resources == []


@pytest.mark.parametrize("data", [None, "", "   ", 12, ["aGk="]])
def test_image_without_data(data: Any) -> None:
    result = normalize_tool_result(
        {"content": [{"type": "image", "data": data, "mimeType": "image/png"}]}
    )
    assert result.parts == [
        {"type": "error", "code": "missing_data", "message": "Image block has no data."}
    ]


def test_image_with_non_image_mime_is_rejected() -> None:
    html = b64(b"<script>alert(1)</script>")
    result = normalize_tool_result(
        {"content": [{"type": "image", "data": html, "mimeType": "text/html"}]}
    )
    assert result.parts == [
        {
            "type": "error",
            "code": "unsupported_mime",
            "message": "Image block has unsupported MIME type 'text/html'.",
        }
    ]


@pytest.mark.parametrize("mime", [None, "", "png", 5, "image/png/x", "image/pn g"])
def test_image_with_missing_or_malformed_mime(mime: Any) -> None:
    result = normalize_tool_result(
        {"content": [{"type": "image", "data": PNG_B64, "mimeType": mime}]}
    )
    assert error_codes(result) == ["missing_field"]
    assert result.parts[0]["message"] == "Image block has no valid MIME type."


def test_audio_block_becomes_inline_file_part() -> None:
    data = b"ID3" + b"\x01" * 100
    result = normalize_tool_result(
        {"content": [{"type": "audio", "data": b64(data), "mimeType": "audio/mpeg"}]}
    )
    assert result.parts == [
        {
            "type": "file",
            "mediaKind": "audio",
            "mimeType": "audio/mpeg",
            "filename": None,
            "size": 103,
            "src": "data:audio/mpeg;base64," + b64(data),
        }
    ]
    assert result.resources[0]["kind"] == "audio"


def test_odd_token_characters_in_media_mime_are_refused() -> None:
    result = normalize_tool_result(
        {"content": [{"type": "image", "data": PNG_B64, "mimeType": "image/png'onerror"}]}
    )
    assert error_codes(result) == ["unsupported_mime"]
    embedded = normalize_tool_result(
        {
            "content": [
                {
                    "type": "resource",
                    "resource": {"uri": "file:///a", "mimeType": "image/p`ng", "blob": PNG_B64},
                }
            ]
        },
        stage=RecordingStage(),
    )
    assert embedded.parts[0]["mimeType"] == "application/octet-stream"
    assert embedded.parts[0]["mediaKind"] == "binary"


def test_audio_block_with_video_mime_is_rejected() -> None:
    result = normalize_tool_result(
        {"content": [{"type": "audio", "data": PNG_B64, "mimeType": "video/mp4"}]}
    )
    assert error_codes(result) == ["unsupported_mime"]


def test_large_image_is_staged_with_one_decoded_copy() -> None:
    data = b"\x89PNG" + bytes(range(256)) * 400  # ~100 KB > 64 KB
    stage = RecordingStage()
    result = normalize_tool_result(
        {"content": [{"type": "image", "data": b64(data), "mimeType": "image/png"}]}, stage=stage
    )
    assert stage.calls == [("image", "image/png", data, None, None)]
    assert result.parts == [
        {
            "type": "image",
            "mimeType": "image/png",
            "size": len(data),
            "asset": {"assetId": "a1", "status": "staged", "url": "/media/a1"},
        }
    ]
    assert result.resources == [
        {
            "uri": "/media/a1",
            "kind": "image",
            "mimeType": "image/png",
            "size": len(data),
            "status": "staged",
        }
    ]
    assert "src" not in result.parts[0]


def test_base64_is_decoded_once_and_payload_is_released(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"decode": 0}
    real_decode = normalize_media.binascii.a2b_base64

    def counting_decode(*args: Any, **kwargs: Any) -> bytes:
        calls["decode"] += 1
        return real_decode(*args, **kwargs)

    monkeypatch.setattr(normalize_media.binascii, "a2b_base64", counting_decode)
    seen: list[weakref.ref[StagedPayload]] = []

    def stage(payload: StagedPayload) -> dict[str, Any]:
        seen.append(weakref.ref(payload))
        return {"assetId": "x", "status": "staged"}

    data = b"\x00\x01" * 200_000
    normalize_tool_result(
        {
            "content": [
                {
                    "type": "resource",
                    "resource": {
                        "uri": "file:///v.mp4",
                        "mimeType": "video/mp4",
                        "blob": b64(data),
                    },
                }
            ]
        },
        stage=stage,
    )
    assert calls["decode"] == 1
    gc.collect()
    assert seen and seen[0]() is None, "the decoded payload must not outlive staging"


def test_large_image_without_stage_is_an_error_not_silently_dropped() -> None:
    data = b"\x00" * (70 * 1024)
    result = normalize_tool_result(
        {"content": [{"type": "image", "data": b64(data), "mimeType": "image/png"}]}
    )
    assert result.parts == [
        {
            "type": "error",
            "code": "media_storage_unavailable",
            "message": "Image (70 KB) could not be shown: media storage is unavailable.",
        }
    ]


def test_failing_stage_keeps_the_rest_of_the_result() -> None:
    def broken_stage(payload: StagedPayload) -> dict[str, Any]:
        raise OSError("disk full")

    big = b64(b"\x00" * (70 * 1024))
    result = normalize_tool_result(
        {
            "content": [
                {"type": "image", "data": big, "mimeType": "image/png"},
                {"type": "text", "text": "after"},
            ]
        },
        stage=broken_stage,
    )
    assert result.parts[0] == {
        "type": "error",
        "code": "staging_failed",
        "message": "Image (70 KB) could not be stored; please try again.",
    }
    assert result.parts[1] == {"type": "text", "text": "after"}


def test_stage_returning_a_non_dict_is_a_staging_failure() -> None:
    result = normalize_tool_result(
        {"content": [{"type": "image", "data": b64(b"\x00" * 70_000), "mimeType": "image/png"}]},
        stage=lambda payload: "not a dict",  # type: ignore[arg-type,return-value]
    )
    assert error_codes(result) == ["staging_failed"]


def test_inline_budget_for_the_whole_result_sends_the_rest_to_staging() -> None:
    stage = RecordingStage()
    image = {"type": "image", "data": b64(b"\x01" * 1000), "mimeType": "image/png"}
    result = normalize_tool_result(
        {"content": [image, image, image]},
        stage=stage,
        inline_limit=1000,
        max_inline_total=2000,
    )
    assert ["src" in p for p in result.parts] == [True, True, False]
    assert "asset" in result.parts[2]
    assert len(stage.calls) == 1


def test_oversize_payload_is_refused_before_decoding() -> None:
    result = normalize_tool_result(
        {"content": [{"type": "image", "data": "A" * 4000, "mimeType": "image/png"}]},
        stage=RecordingStage(),
        max_binary=1000,
    )
    assert error_codes(result) == ["too_large"]


# --------------------------------------------------------------------------- embedded resources


def test_embedded_text_resource_becomes_text_part_with_uri() -> None:
    result = normalize_tool_result(
        {
            "content": [
                {
                    "type": "resource",
                    "resource": {
                        "uri": "file:///notes.md",
                        "mimeType": "text/markdown",
                        "text": "# hi",
                    },
                }
            ]
        }
    )
    assert result.parts == [
        {"type": "text", "text": "# hi", "uri": "file:///notes.md", "mimeType": "text/markdown"}
    ]


def test_html_resource_outside_ui_scheme_is_not_rendered_as_ui() -> None:
    html = "<script>steal()</script>"
    result = normalize_tool_result(
        {
            "content": [
                {
                    "type": "resource",
                    "resource": {
                        "uri": "https://evil.example/x",
                        "mimeType": "text/html",
                        "text": html,
                    },
                },
                {
                    "type": "resource",
                    "resource": {
                        "uri": "file:///page.html",
                        "mimeType": "text/html",
                        "blob": b64(html.encode()),
                    },
                },
            ]
        },
        stage=RecordingStage(),
    )
    assert [p["type"] for p in result.parts] == ["text", "file"]
    assert result.parts[0]["text"] == html
    assert result.parts[1]["mediaKind"] == "binary"
    assert result.parts[1]["filename"] == "page.html"
    assert result.documents == {}


def test_embedded_blob_kinds_follow_the_mime_type() -> None:
    stage = RecordingStage()
    small = b64(b"\x00" * 10)
    result = normalize_tool_result(
        {
            "content": [
                {
                    "type": "resource",
                    "resource": {
                        "uri": "file:///a/pic.png",
                        "mimeType": "image/png",
                        "blob": small,
                    },
                },
                {
                    "type": "resource",
                    "resource": {
                        "uri": "file:///a/song.ogg",
                        "mimeType": "audio/ogg",
                        "blob": small,
                    },
                },
                {
                    "type": "resource",
                    "resource": {
                        "uri": "file:///a/clip.mp4",
                        "mimeType": "video/mp4",
                        "blob": small,
                    },
                },
                {
                    "type": "resource",
                    "resource": {
                        "uri": "file:///a/report%20v2.pdf",
                        "mimeType": "application/pdf",
                        "blob": small,
                    },
                },
                {"type": "resource", "resource": {"uri": "mem://x", "blob": small}},
            ]
        },
        stage=stage,
    )
    kinds = [(p["type"], p.get("mediaKind")) for p in result.parts]
    assert kinds == [
        ("image", None),
        ("file", "audio"),
        ("file", "video"),
        ("file", "binary"),
        ("file", "binary"),
    ]
    # Images/audio inline; video and binary go to staging even when small.
    assert "src" in result.parts[0] and "src" in result.parts[1]
    assert [call[0] for call in stage.calls] == ["video", "binary", "binary"]
    assert result.parts[3]["filename"] == "report v2.pdf"
    assert result.parts[4]["mimeType"] == "application/octet-stream"
    assert [r["filename"] for r in result.resources if "filename" in r] == [
        "pic.png",
        "song.ogg",
        "clip.mp4",
        "report v2.pdf",
    ]  # "mem://x" has no path, so no filename
    assert stage.calls[0][4] == "file:///a/clip.mp4"


def test_small_video_without_stage_stays_inline_and_large_one_is_an_error() -> None:
    small = {
        "type": "resource",
        "resource": {"uri": "file:///c.webm", "mimeType": "video/webm", "blob": b64(b"\x1a" * 50)},
    }
    big = {
        "type": "resource",
        "resource": {
            "uri": "file:///c.webm",
            "mimeType": "video/webm",
            "blob": b64(b"\x1a" * 70_000),
        },
    }
    result = normalize_tool_result({"content": [small, big]})
    assert result.parts[0]["src"].startswith("data:video/webm;base64,")
    assert result.parts[1]["code"] == "media_storage_unavailable"
    assert result.parts[1]["message"].startswith("Video (68 KB)")


def test_hostile_filenames_are_sanitized() -> None:
    result = normalize_tool_result(
        {
            "content": [
                {
                    "type": "resource",
                    "resource": {
                        "uri": "file:///x/..%2F..%2Fetc%2Fpasswd",
                        "mimeType": "text/plain",
                        "blob": b64(b"x"),
                    },
                }
            ]
        },
        stage=RecordingStage(),
    )
    filename = result.parts[0]["filename"]
    assert "/" not in filename and "\\" not in filename
    assert not filename.startswith(".")


@pytest.mark.parametrize(
    "resource",
    [None, "ui://x", [], {"uri": "file:///a"}, {"uri": "ui://a", "mimeType": "text/html"}],
)
def test_broken_embedded_resources(resource: Any) -> None:
    result = normalize_tool_result({"content": [{"type": "resource", "resource": resource}]})
    assert len(result.parts) == 1
    assert result.parts[0]["type"] == "error"
    assert result.parts[0]["code"] in {"invalid_resource", "missing_data"}


# --------------------------------------------------------------------------- UI resources


def ui_block(
    uri: str, mime: str, *, text: str | None = None, blob: str | None = None, meta: Any = None
) -> dict[str, Any]:
    resource: dict[str, Any] = {"uri": uri, "mimeType": mime}
    if text is not None:
        resource["text"] = text
    if blob is not None:
        resource["blob"] = blob
    if meta is not None:
        resource["_meta"] = meta
    return {"type": "resource", "resource": resource}


def test_raw_html_ui_resource_goes_to_documents_not_the_part() -> None:
    html = "<!doctype html><p>Board MARKER</p>"
    result = normalize_tool_result(
        {"content": [ui_block("ui://board/app", "text/html", text=html)]}
    )
    digest = hashlib.sha256(html.encode()).hexdigest()
    assert result.parts == [
        {
            "type": "ui",
            "uri": "ui://board/app",
            "mimeType": "text/html",
            "flavor": "html",
            "contentHash": digest,
            "url": None,
            "meta": {"csp": None, "permissions": [], "domain": None, "prefersBorder": None},
            "preferredFrameSize": None,
            "initialRenderData": None,
            "framework": None,
        }
    ]
    assert result.documents == {
        digest: {"uri": "ui://board/app", "mimeType": "text/html", "text": html}
    }
    assert "MARKER" not in json.dumps(result.parts)
    assert result.resources == [
        {
            "uri": "ui://board/app",
            "kind": "ui",
            "mimeType": "text/html",
            "size": len(html),
            "status": "inline",
        }
    ]


@pytest.mark.parametrize(
    "mime",
    ["text/html;profile=mcp-app", "text/html; profile=mcp-app", 'TEXT/HTML ; Profile="MCP-App"'],
)
def test_mcp_app_mime_parameters_are_normalized(mime: str) -> None:
    result = normalize_tool_result({"content": [ui_block("ui://a/b", mime, text="<html></html>")]})
    part = result.parts[0]
    assert part["flavor"] == "mcp-app"
    assert part["mimeType"] == "text/html;profile=mcp-app"
    assert part["contentHash"] in result.documents


def test_mcp_app_mime_with_a_single_url_is_a_url_view() -> None:
    result = normalize_tool_result(
        {
            "content": [
                ui_block(
                    "ui://dash/1",
                    "text/html;profile=mcp-app",
                    text="  https://dash.example.com/w?id=1\n",
                )
            ]
        }
    )
    part = result.parts[0]
    assert part["flavor"] == "url"
    assert part["url"] == "https://dash.example.com/w?id=1"
    assert result.documents == {}
    assert result.resources[0]["status"] == "external"


def test_uri_list_takes_the_first_valid_http_line() -> None:
    body = "# comment\r\njavascript:alert(1)\nftp://x.example\nhttps://user:pw@evil.example/\nhttps://ok.example/frame\nhttps://second.example/\n"
    result = normalize_tool_result({"content": [ui_block("ui://u/1", "text/uri-list", text=body)]})
    assert result.parts[0]["flavor"] == "url"
    assert result.parts[0]["url"] == "https://ok.example/frame"


def test_uri_list_without_a_valid_url_is_an_error() -> None:
    result = normalize_tool_result(
        {
            "content": [
                ui_block("ui://u/1", "text/uri-list", text="# only comments\njavascript:alert(1)")
            ]
        }
    )
    assert result.parts == [
        {
            "type": "error",
            "code": "invalid_ui_url",
            "message": "UI resource ui://u/1 lists no valid http(s) URL.",
        }
    ]
    assert result.resources == []


def test_remote_dom_records_its_framework() -> None:
    result = normalize_tool_result(
        {
            "content": [
                ui_block(
                    "ui://r/1",
                    "application/vnd.mcp-ui.remote-dom+javascript; framework=React",
                    text="root.append()",
                )
            ]
        }
    )
    part = result.parts[0]
    assert (part["flavor"], part["framework"]) == ("remote-dom", "react")
    assert part["mimeType"] == "application/vnd.mcp-ui.remote-dom+javascript;framework=react"


def test_skybridge_resource() -> None:
    result = normalize_tool_result(
        {"content": [ui_block("ui://widget/x.html", "text/html+skybridge", text="<div></div>")]}
    )
    assert result.parts[0]["flavor"] == "skybridge"


def test_ui_blob_is_decoded_as_utf8() -> None:
    html = "<p>héllo</p>"
    result = normalize_tool_result(
        {"content": [ui_block("ui://b/1", "text/html", blob=b64(html.encode()))]}
    )
    digest = result.parts[0]["contentHash"]
    assert result.documents[digest]["text"] == html


def test_ui_blob_that_is_not_utf8_or_not_base64() -> None:
    result = normalize_tool_result(
        {
            "content": [
                ui_block("ui://b/1", "text/html", blob=b64(b"\xff\xfe\x00bad")),
                ui_block("ui://b/2", "text/html", blob="%%%"),
            ]
        }
    )
    assert error_codes(result) == ["invalid_encoding", "invalid_base64"]
    assert result.parts[0]["message"] == "UI resource ui://b/1 is not valid UTF-8."


def test_ui_scheme_with_a_non_ui_mime_is_ordinary_content() -> None:
    result = normalize_tool_result({"content": [ui_block("ui://x/img", "image/png", blob=PNG_B64)]})
    assert result.parts[0]["type"] == "image"


def test_oversized_ui_document_is_refused() -> None:
    result = normalize_tool_result(
        {"content": [ui_block("ui://x/1", "text/html", text="x" * 200)]}, max_document=100
    )
    assert error_codes(result) == ["too_large"]
    assert result.documents == {}


def test_ui_resource_meta_is_parsed() -> None:
    meta = {
        "ui": {
            "csp": {"connectDomains": ["https://api.example.com"], "resourceDomains": "bad"},
            "permissions": {"camera": {}, "microphone": "yes"},
            "prefersBorder": True,
            "domain": "https://app.example.com",
        },
        "mcpui.dev/ui-preferred-frame-size": ["800px", 600],
        "mcpui.dev/ui-initial-render-data": {"theme": "dark"},
    }
    result = normalize_tool_result(
        {"content": [ui_block("ui://m/1", "text/html", text="<p>", meta=meta)]}
    )
    part = result.parts[0]
    assert part["meta"]["csp"] == {"connectDomains": ["https://api.example.com"]}
    assert part["meta"]["permissions"] == ["camera"]
    assert part["meta"]["prefersBorder"] is True
    assert part["meta"]["domain"] == "https://app.example.com"
    assert len(part["meta"]["problems"]) == 2
    assert part["preferredFrameSize"] == ["800px", "600px"]
    assert part["initialRenderData"] == {"theme": "dark"}


def test_same_document_twice_is_stored_once() -> None:
    block = ui_block("ui://a/1", "text/html", text="<p>same</p>")
    result = normalize_tool_result({"content": [block, block]})
    assert len(result.parts) == 2
    assert len(result.documents) == 1


# --------------------------------------------------------------------------- resource links


def test_resource_link_http_is_clickable() -> None:
    result = normalize_tool_result(
        {
            "content": [
                {
                    "type": "resource_link",
                    "uri": "https://docs.example.com/report.pdf",
                    "name": "report",
                    "title": "Q3 report",
                    "mimeType": "Application/PDF",
                    "description": "The report",
                    "size": 2048,
                }
            ]
        }
    )
    assert result.parts == [
        {
            "type": "link",
            "uri": "https://docs.example.com/report.pdf",
            "name": "report",
            "title": "Q3 report",
            "mimeType": "application/pdf",
            "description": "The report",
            "size": 2048,
            "clickable": True,
        }
    ]
    assert result.resources == [
        {
            "uri": "https://docs.example.com/report.pdf",
            "kind": "link",
            "mimeType": "application/pdf",
            "size": 2048,
            "status": "external",
        }
    ]


@pytest.mark.parametrize(
    "uri",
    [
        "javascript:alert(document.cookie)",
        "data:text/html,<script>alert(1)</script>",
        "file:///etc/passwd",
        "vbscript:msgbox",
        "https://user:pw@evil.example/",
        "ui://board/app",
    ],
)
def test_unsafe_link_schemes_are_kept_as_plain_text(uri: str) -> None:
    result = normalize_tool_result(
        {"content": [{"type": "resource_link", "uri": uri, "name": "n"}]}
    )
    assert result.parts[0]["clickable"] is False
    assert result.parts[0]["uri"] == uri


@pytest.mark.parametrize("uri", [None, "", 5, "https://x.example/\x00", "h" * 5000])
def test_resource_link_without_valid_uri(uri: Any) -> None:
    result = normalize_tool_result(
        {"content": [{"type": "resource_link", "uri": uri, "name": "n"}]}
    )
    assert error_codes(result) == ["missing_field"]


def test_resource_link_with_hostile_fields() -> None:
    result = normalize_tool_result(
        {
            "content": [
                {
                    "type": "resource_link",
                    "uri": "https://x.example/a.txt",
                    "name": 5,
                    "size": -1,
                    "title": {"x": 1},
                    "mimeType": "bad",
                }
            ]
        }
    )
    part = result.parts[0]
    assert part["name"] == "a.txt"
    assert part["size"] is None
    assert part["title"] is None
    assert part["mimeType"] is None


# --------------------------------------------------------------------------- structured / _meta


@pytest.mark.parametrize("structured", [[1, 2], "text", 5, True])
def test_structured_content_must_be_an_object(structured: Any) -> None:
    result = normalize_tool_result({"structuredContent": structured})
    assert result.structured is None
    assert error_codes(result) == ["invalid_structured_content"]


def test_structured_content_with_non_json_values_is_cleaned() -> None:
    result = normalize_tool_result(
        {"structuredContent": {"a": float("nan"), "b": b"raw", 3: "x", "ok": [1]}}
    )
    assert result.structured == {"a": None, "b": None, "3": "x", "ok": [1]}
    assert error_codes(result) == ["invalid_structured_content"]
    json.dumps(result.to_dict(), allow_nan=False)


def test_deeply_nested_structured_content_is_bounded() -> None:
    deep: dict[str, Any] = {}
    cursor = deep
    for _ in range(5000):
        cursor["x"] = {}
        cursor = cursor["x"]
    result = normalize_tool_result({"structuredContent": deep})
    assert "nested deeper" in errors(result)[0]["message"]
    json.dumps(result.to_dict())


def test_result_meta_goes_to_ui_meta_only_when_an_object() -> None:
    assert normalize_tool_result({"_meta": {"a": [1]}}).ui_meta == {"a": [1]}
    bad = normalize_tool_result({"_meta": ["not", "an", "object"]})
    assert bad.ui_meta is None
    assert bad.parts == [
        {
            "type": "error",
            "code": "invalid_meta",
            "message": "The result's _meta is a array, not an object; it was dropped.",
        }
    ]


def test_audience_annotation_is_kept_when_it_names_one_audience() -> None:
    result = normalize_tool_result(
        {
            "content": [
                {"type": "text", "text": "for you", "annotations": {"audience": ["user"]}},
                {
                    "type": "text",
                    "text": "for both",
                    "annotations": {"audience": ["user", "assistant"]},
                },
                {"type": "text", "text": "junk", "annotations": {"audience": "user"}},
            ]
        }
    )
    assert result.parts[0]["audience"] == ["user"]
    assert "audience" not in result.parts[1]
    assert "audience" not in result.parts[2]


def test_too_many_blocks_are_cut_with_a_notice() -> None:
    result = normalize_tool_result({"content": [{"type": "text", "text": "x"}] * 10}, max_blocks=3)
    assert [p["type"] for p in result.parts] == ["text", "text", "text", "error"]
    assert (
        result.parts[-1]["message"]
        == "The tool returned 10 content blocks; only the first 3 are shown."
    )


# --------------------------------------------------------------------------- packaging


def test_build_sanitized_tool_result_has_exactly_the_canonical_keys() -> None:
    normalized = normalize_tool_result(
        {
            "content": [{"type": "text", "text": "x"}],
            "structuredContent": {"a": 1},
            "_meta": {"m": 1},
        }
    )
    sanitized = build_sanitized_tool_result(
        normalized, tool_name="search", tool_call_id="tc1", server="srv"
    )
    assert sanitized == {
        "parts": [{"type": "text", "text": "x"}],
        "structured": {"a": 1},
        "resources": [],
        "meta": {
            "toolName": "search",
            "toolCallId": "tc1",
            "server": "srv",
            "success": True,
            "isError": False,
        },
        "uiMeta": {"m": 1},
    }
    failed = build_sanitized_tool_result(
        normalize_tool_result({"isError": True}), tool_name="t", tool_call_id="c", server="s"
    )
    assert failed["meta"]["success"] is False
    assert failed["meta"]["isError"] is True


def sanitize(raw: Any, **kwargs: Any) -> dict[str, Any]:
    return build_sanitized_tool_result(
        normalize_tool_result(raw, **kwargs), tool_name="t", tool_call_id="c", server="s"
    )


def test_text_fallback_lists_text_then_descriptions() -> None:
    sanitized = sanitize(
        {
            "content": [
                {"type": "image", "data": b64(b"\x00" * (12 * 1024)), "mimeType": "image/png"},
                {"type": "text", "text": "Here is the board."},
                ui_block("ui://board/app", "text/html", text="<p>"),
                {
                    "type": "resource_link",
                    "uri": "https://x.example/doc",
                    "name": "doc",
                    "title": "The doc",
                },
                {"type": "foo"},
                {
                    "type": "resource",
                    "resource": {
                        "uri": "file:///a.mp3",
                        "mimeType": "audio/mpeg",
                        "blob": b64(b"\x00" * 2048),
                    },
                },
            ]
        }
    )
    assert text_fallback(sanitized) == "\n".join(
        [
            "Here is the board.",
            "[image: image/png, 12 KB]",
            "[interactive view: ui://board/app — open in the web app]",
            "[link: The doc — https://x.example/doc]",
            "[error: Unknown content block type 'foo' was skipped.]",
            "[audio: audio/mpeg, 2 KB, a.mp3]",
        ]
    )


def test_text_fallback_renders_structured_json_when_there_is_no_text() -> None:
    assert (
        text_fallback(sanitize({"structuredContent": {"temp": 21.5, "unit": "C"}}))
        == '{"temp":21.5,"unit":"C"}'
    )
    long_fallback = text_fallback(sanitize({"structuredContent": {"rows": list(range(5000))}}))
    assert len(long_fallback) == 2000
    assert long_fallback.endswith("…")


def test_text_fallback_for_empty_and_error_results() -> None:
    assert text_fallback(sanitize({})) == "(The tool returned no content.)"
    assert (
        text_fallback(sanitize({"isError": True}))
        == "(The tool reported an error without details.)"
    )
    assert text_fallback(None) == ""
    assert text_fallback({"parts": "junk"}) == "(The tool returned no content.)"


def test_text_fallback_hides_assistant_only_parts() -> None:
    sanitized = sanitize(
        {
            "content": [
                {"type": "text", "text": "secret plan", "annotations": {"audience": ["assistant"]}},
                {"type": "text", "text": "hi"},
            ]
        }
    )
    assert text_fallback(sanitized) == "hi"


SENTINEL = "SENTINEL-7f3a"


def test_model_content_never_contains_result_or_resource_meta() -> None:
    nested_meta = {"a": {"b": [{"c": SENTINEL}, {SENTINEL: 1}]}, SENTINEL: SENTINEL}
    raw = {
        "content": [
            {"type": "text", "text": "visible", "_meta": {"k": SENTINEL}},
            {
                "type": "image",
                "data": PNG_B64,
                "mimeType": "image/png",
                "_meta": nested_meta,
                "annotations": {"x": SENTINEL},
            },
            ui_block(
                "ui://a/b",
                "text/html;profile=mcp-app",
                text="<p>view</p>",
                meta={
                    "ui": {
                        "csp": {"connectDomains": [f"https://{SENTINEL}.example"]},
                        "permissions": {SENTINEL: {}},
                        "domain": SENTINEL,
                    },
                    "mcpui.dev/ui-initial-render-data": {"deep": {"x": SENTINEL}},
                    "mcpui.dev/ui-preferred-frame-size": [SENTINEL, SENTINEL],
                    SENTINEL: nested_meta,
                },
            ),
            {
                "type": "resource_link",
                "uri": "https://x.example",
                "name": "x",
                "_meta": nested_meta,
            },
        ],
        "structuredContent": {"answer": 42},
        "_meta": {
            "ui": {"deep": [[[{"x": SENTINEL}]]]},
            SENTINEL: nested_meta,
            "openai/widgetState": SENTINEL,
        },
    }
    sanitized = sanitize(raw)
    assert SENTINEL in json.dumps(sanitized)  # the UI does get it...
    for_model = model_content(sanitized)
    dumped = json.dumps(for_model)
    assert SENTINEL not in dumped  # ...the model never does
    assert for_model["structuredContent"] == {"answer": 42}
    assert for_model["content"][0] == {"type": "text", "text": "visible"}
    assert {
        "type": "text",
        "text": "[interactive view ui://a/b was shown to the user]",
    } in for_model["content"]


def test_model_content_skips_user_only_parts_and_bad_input() -> None:
    sanitized = sanitize(
        {
            "content": [
                {"type": "text", "text": "for the user", "annotations": {"audience": ["user"]}},
                {"type": "text", "text": "both"},
            ]
        }
    )
    assert model_content(sanitized) == {
        "content": [{"type": "text", "text": "both"}],
        "structuredContent": None,
    }
    assert model_content(None) == {"content": [], "structuredContent": None}
    assert model_content({"parts": [1, None, {"type": "text"}], "structured": [1]}) == {
        "content": [],
        "structuredContent": None,
    }
