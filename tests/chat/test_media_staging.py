"""Staging on the request path and its two ends (DESIGN §4, §9).

- large payloads are staged as their base64 text (``<key>.b64``), never decoded by the
  request path; the worker decodes them strictly, in bounded chunks, and checks the size;
- payloads small enough to be inlined get the worker's type checks on the request path.

No worker here (tests/chat/test_media_tasks.py runs one).
"""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

import pytest

from chat import media_store
from chat.media_store import INVALID_BASE64, MediaRejected
from examples.media import server as samples

PNG = samples.encode_image(samples.render_picture(64, 48, "png"), "png")
WAV = samples.render_tone(0.1, 440.0)
ZIP = samples.build_zip()
LIE = "The file's content (ZIP archive) does not match its declared type image/png."


# --------------------------------------------------------------------------- worker: decoding


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Read 4 KiB of base64 at a time: every boundary case happens in a small file."""
    monkeypatch.setattr(media_store, "BASE64_CHUNK", 4096)


def decode(tmp_path: Path, text: bytes, expected: int | None = None) -> media_store.StagedFile:
    source, target = tmp_path / "x.b64", tmp_path / "x.b64.decoded"
    source.write_bytes(text)
    return media_store.decode_base64_file(source, target, expected_size=expected)


@pytest.mark.parametrize("size", [0, 1, 2, 3, 3071, 3072, 3073, 100_000])
@pytest.mark.parametrize("wrap", [False, True])
def test_decoding_a_staged_file(tmp_path: Path, small_chunks: None, size: int, wrap: bool):
    data = os.urandom(size)
    text = base64.encodebytes(data) if wrap else base64.b64encode(data)
    staged = decode(tmp_path, text, expected=size)
    assert staged.path.read_bytes() == data
    assert (staged.size, staged.sha256) == (size, hashlib.sha256(data).hexdigest())
    assert staged.head == data[: media_store.HEAD_BYTES]


@pytest.mark.parametrize(
    "text",
    [
        b"QUJD*EVG",  # not the alphabet
        b"QUJDRA==QUJD",  # padding in the middle
        b"QUJDRA=" + b"=" * 1 + b"\n" * 5000 + b"QUJD",  # data after padding, next chunk
        b"QUJDREVGRw",  # not a multiple of 4
        b"QUJD\x0bREVG",  # a vertical tab: not what the request path's size count skips
        b"QUJ-REVG",  # the URL-safe alphabet
    ],
)
def test_invalid_base64_is_rejected_with_a_reason(
    tmp_path: Path, small_chunks: None, text: bytes
) -> None:
    with pytest.raises(MediaRejected) as caught:
        decode(tmp_path, text)
    assert (
        caught.value.reason
        == INVALID_BASE64
        == ("The media's data is not valid base64, so it was not stored.")
    )


def test_a_staged_file_cut_short_is_rejected(tmp_path: Path, small_chunks: None) -> None:
    """A power loss before the background fsync can leave a short file: it must not be
    stored as if it were the media."""
    data = os.urandom(30_000)
    with pytest.raises(MediaRejected) as caught:
        decode(tmp_path, base64.b64encode(data)[:20_000], expected=len(data))
    assert caught.value.reason == (
        "The staged media is incomplete (15000 of 30000 bytes), so it was not stored."
    )


def test_staging_keys_of_both_kinds_and_nothing_else(settings, tmp_path: Path) -> None:
    settings.MEDIA_STAGING_ROOT = str(tmp_path)
    assert media_store.staging_file("a" * 32) == tmp_path / ("a" * 32)
    assert media_store.staging_file("a" * 32 + ".b64") == tmp_path / ("a" * 32 + ".b64")
    for key in ("a" * 32 + ".b64.decoded", "a" * 32 + ".png", "../" + "a" * 32, "A" * 32):
        assert media_store.staging_file(key) is None


# --------------------------------------------------------------------------- request path: inline


def test_inline_checks_accept_what_the_worker_accepts() -> None:
    assert media_store.inline_rejection(kind="image", declared="image/png", data=PNG) is None
    assert media_store.inline_rejection(kind="audio", declared="audio/wav", data=WAV) is None
    blob = b"\x00\x01anything"
    assert media_store.inline_rejection(kind="binary", declared="x/y", data=blob) is None


@pytest.mark.parametrize(
    ("kind", "declared", "data", "reason"),
    [
        ("image", "image/png", ZIP, LIE),
        (
            "image",
            "image/png",
            samples.build_png_bomb(50_000),
            "The image is larger than 50 megapixels (50000 × 50000 pixels; "
            "decompression bomb protection).",
        ),
        ("image", "image/png", PNG[:60], None),  # damaged: Pillow's words, checked below
        (
            "audio",
            "audio/x-unknown",
            WAV,
            "Audio of type audio/x-unknown cannot be verified, so it was not stored.",
        ),
        (
            "binary",
            "application/pdf",
            ZIP,
            "The file's content (ZIP archive) does not match its declared type application/pdf.",
        ),
    ],
)
def test_inline_checks_refuse_with_the_workers_words(kind, declared, data, reason) -> None:
    found = media_store.inline_rejection(kind=kind, declared=declared, data=data)
    if reason is None:
        assert found is not None and found.startswith("The image data is damaged or incomplete")
    else:
        assert found == reason
    # The worker says the same about the same bytes.
    try:
        verified = media_store.check_declared_type(
            data[: media_store.HEAD_BYTES], declared=declared, kind=kind
        )
        if verified.signature and verified.signature.pillow_format:
            import io

            media_store.inspect_image(io.BytesIO(data), verified.signature.pillow_format)
    except MediaRejected as exc:
        assert exc.reason == found
    else:
        pytest.fail("the worker accepted what the request path refused")


# --------------------------------------------------------------------------- request path: staging


@pytest.fixture
def staging(settings, tmp_path: Path) -> Path:
    settings.MEDIA_STAGING_ROOT = str(tmp_path / "staging")
    return tmp_path / "staging"


def test_a_large_payload_is_staged_as_text_and_a_small_one_as_bytes(staging: Path) -> None:
    from chat.media import stage_payload
    from mcp_bridge.normalize import StagedPayload

    text = base64.b64encode(os.urandom(300_000)).decode()
    encoded = stage_payload(
        StagedPayload(kind="video", mime_type="video/mp4", data=None, encoded=text, size=300_000)
    )
    assert encoded["stagingKey"].endswith(".b64") and encoded["size"] == 300_000
    assert (staging / encoded["stagingKey"]).read_bytes() == text.encode()
    decoded = stage_payload(StagedPayload(kind="audio", mime_type="audio/wav", data=WAV))
    assert len(decoded["stagingKey"]) == 32 and decoded["size"] == len(WAV)
    assert (staging / decoded["stagingKey"]).read_bytes() == WAV
    for key in (encoded["stagingKey"], decoded["stagingKey"]):
        assert media_store.staging_file(key) == staging / key


def test_normalize_result_defers_large_payloads_and_checks_inline_ones(
    staging: Path, settings
) -> None:
    from chat.media import DEFER_DECODE_OVER, normalize_result

    settings.ATRIUM_MEDIA_INLINE_LIMIT = 64 * 1024
    big = base64.b64encode(os.urandom(DEFER_DECODE_OVER + 3)).decode()
    result = normalize_result(
        {
            "content": [
                {"type": "image", "mimeType": "image/png", "data": base64.b64encode(ZIP).decode()},
                {"type": "image", "mimeType": "image/png", "data": base64.b64encode(PNG).decode()},
                {
                    "type": "resource",
                    "resource": {
                        "uri": "media://v.avi",
                        "mimeType": "video/x-msvideo",
                        "blob": big,
                    },
                },
            ]
        }
    )
    lie, png, video = result.parts
    assert lie == {"type": "error", "code": "media_rejected", "message": LIE}
    assert png["src"].startswith("data:image/png;base64,")
    assert video["asset"]["stagingKey"].endswith(".b64")
    assert video["size"] == DEFER_DECODE_OVER + 3
    assert (staging / video["asset"]["stagingKey"]).read_bytes() == big.encode()
