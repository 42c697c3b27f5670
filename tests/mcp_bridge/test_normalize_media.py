"""The normalizer's media options (DESIGN §4, §9): ``defer_decode_over`` hands large
payloads to staging still base64-encoded (the request path never decodes 50 MB), and
``check_inline`` vets what would be inlined as a ``data:`` URI."""

from __future__ import annotations

import base64
import binascii
import os
from typing import Any

import pytest

from mcp_bridge.normalize import StagedPayload, base64_decoded_size, normalize_tool_result
from mcp_bridge.normalize import media as normalize_media

MIB = 1024 * 1024


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def video(data_b64: str) -> dict[str, Any]:
    resource = {"uri": "media://video/clip.avi", "mimeType": "video/x-msvideo", "blob": data_b64}
    return {"content": [{"type": "resource", "resource": resource}]}


class Stage:
    def __init__(self) -> None:
        self.payloads: list[StagedPayload] = []

    def __call__(self, payload: StagedPayload) -> dict[str, Any]:
        self.payloads.append(payload)
        return {"stagingKey": "k", "status": "staged", "size": payload.size}


# --------------------------------------------------------------------------- sizes


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 57, 58, 59, 1000, 4096])
def test_decoded_size_from_length_and_padding(size: int) -> None:
    data = os.urandom(size)
    assert base64_decoded_size(b64(data)) == size
    wrapped = base64.encodebytes(data).decode()  # MIME: 76-character lines
    assert base64_decoded_size(wrapped) == size
    assert base64_decoded_size(" " + b64(data).replace("A", "A\r\n") + "\t\n") == size


@pytest.mark.parametrize(
    "value",
    ["abc", "abcde", "ab=c", "é" * 4, "abc=\u00e9", "ab\x0bcd"],
)
def test_lengths_and_padding_that_cannot_be_base64(value: str) -> None:
    assert base64_decoded_size(value) is None


# --------------------------------------------------------------------------- deferring


def test_a_large_payload_is_staged_as_its_base64_text_undecoded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_decoding(*args: Any, **kwargs: Any) -> bytes:
        raise AssertionError("decoded on the request path")

    monkeypatch.setattr(normalize_media.binascii, "a2b_base64", no_decoding)
    monkeypatch.setattr(normalize_media.base64, "b64decode", no_decoding)
    text = b64(os.urandom(2 * MIB + 1))
    stage = Stage()
    result = normalize_tool_result(video(text), stage=stage, defer_decode_over=MIB)
    (payload,) = stage.payloads
    assert payload.encoded is text  # the very string: no copy
    assert payload.data is None and payload.size == 2 * MIB + 1
    assert (payload.kind, payload.mime_type, payload.filename) == (
        "video",
        "video/x-msvideo",
        "clip.avi",
    )
    (part,) = result.parts
    assert part["size"] == 2 * MIB + 1 and part["asset"]["status"] == "staged"
    assert result.resources[0]["size"] == 2 * MIB + 1


def test_below_the_limit_payloads_are_decoded_as_before() -> None:
    data = os.urandom(MIB)
    stage = Stage()
    normalize_tool_result(video(b64(data)), stage=stage, defer_decode_over=MIB)
    (payload,) = stage.payloads
    assert payload.encoded is None and payload.data == data and payload.size == MIB


def test_without_the_option_everything_is_decoded() -> None:
    data = os.urandom(2 * MIB)
    stage = Stage()
    normalize_tool_result(video(b64(data)), stage=stage)
    assert stage.payloads[0].data == data and stage.payloads[0].encoded is None


def test_deferred_payloads_still_get_the_cheap_checks() -> None:
    stage = Stage()
    text = b64(os.urandom(2 * MIB))
    result = normalize_tool_result(video(text[:-1]), stage=stage, defer_decode_over=MIB)
    assert result.parts == [
        {
            "type": "error",
            "code": "invalid_base64",
            "message": "Video block has invalid base64 data.",
        }
    ]
    result = normalize_tool_result(video(text), stage=stage, defer_decode_over=MIB, max_binary=MIB)
    assert result.parts[0]["code"] == "too_large"
    result = normalize_tool_result(video(text), defer_decode_over=MIB)
    assert result.parts[0] == {
        "type": "error",
        "code": "media_storage_unavailable",
        "message": "Video (2 MB) could not be shown: media storage is unavailable.",
    }
    assert stage.payloads == []


def test_a_failing_stage_of_a_deferred_payload_is_an_error_part() -> None:
    def broken(payload: StagedPayload) -> dict[str, Any]:
        raise OSError("disk full")

    result = normalize_tool_result(
        video(b64(os.urandom(2 * MIB))), stage=broken, defer_decode_over=MIB
    )
    assert result.parts[0] == {
        "type": "error",
        "code": "staging_failed",
        "message": "Video (2 MB) could not be stored; please try again.",
    }


def test_the_alphabet_is_left_to_whoever_decodes() -> None:
    """Checking it takes a full decode; the media worker rejects it (chat.media.processing)."""
    text = "*" * (2 * MIB)
    stage = Stage()
    normalize_tool_result(video(text), stage=stage, defer_decode_over=MIB)
    assert stage.payloads[0].encoded == text
    with pytest.raises(binascii.Error):
        binascii.a2b_base64(text, strict_mode=True)


# --------------------------------------------------------------------------- inline checks


PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 24
ZIP = b"PK\x03\x04" + b"\x00" * 40


def image(data: bytes, mime: str = "image/png") -> dict[str, Any]:
    return {"content": [{"type": "image", "data": b64(data), "mimeType": mime}]}


def test_inline_media_is_checked_and_a_rejection_is_an_error_part() -> None:
    seen: list[tuple[str, str, bytes]] = []

    def check(kind: str, mime: str, data: bytes) -> str | None:
        seen.append((kind, mime, data))
        if not data.startswith(PNG[:8]):
            return "The file's content (ZIP archive) does not match its declared type image/png."
        return None

    fine = normalize_tool_result(image(PNG), check_inline=check)
    assert fine.parts[0]["src"].startswith("data:image/png;base64,")
    lie = normalize_tool_result(image(ZIP), check_inline=check)
    assert lie.parts == [
        {
            "type": "error",
            "code": "media_rejected",
            "message": "The file's content (ZIP archive) does not match its declared type "
            "image/png.",
        }
    ]
    assert lie.resources == []
    assert seen == [("image", "image/png", PNG), ("image", "image/png", ZIP)]


def test_staged_media_is_not_checked_inline() -> None:
    def check(kind: str, mime: str, data: bytes) -> str | None:
        raise AssertionError("staged media is the worker's to check")

    stage = Stage()
    result = normalize_tool_result(
        image(ZIP * 100), stage=stage, inline_limit=16, check_inline=check
    )
    assert result.parts[0]["asset"]["status"] == "staged"


def test_a_checker_that_fails_does_not_let_content_through() -> None:
    def check(kind: str, mime: str, data: bytes) -> str | None:
        raise RuntimeError("boom")

    result = normalize_tool_result(image(PNG), check_inline=check)
    assert result.parts == [
        {
            "type": "error",
            "code": "media_rejected",
            "message": "Image could not be checked, so it is not shown.",
        }
    ]
