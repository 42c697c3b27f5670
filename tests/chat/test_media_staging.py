"""Staging on the request path and its two ends (DESIGN §4, §9).

- large payloads are staged as their base64 text (``<key>.b64``), never decoded by the
  request path; the worker decodes them strictly, in bounded chunks, and checks the size;
- payloads small enough to be inlined get the worker's type checks on the request path;
- a payload the stdio transport spooled is renamed into staging, and the sweeper removes
  staging files nobody will persist.

No worker here (tests/chat/test_media_tasks.py runs one).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from pathlib import Path

import pytest

from audit.models import AuditEvent
from audit.types import AuditEventType
from chat import services
from chat.media import formats as media_formats
from chat.media import images as media_images
from chat.media import processing as media_processing
from chat.media import services as media_services
from chat.media import storage as media_storage
from chat.media import tasks
from chat.media.formats import MediaRejected
from chat.media.models import MediaAsset, MediaStatus
from chat.media.processing import INVALID_BASE64
from chat.media.staging import normalize_result
from chat.models import ThreadEvent
from examples.media import server as samples
from mcp_bridge.spooled_media import SPOOL_SUBDIR
from mcp_bridge.stdio_transport import LineSplitter, parse_message

PNG = samples.encode_image(samples.render_picture(64, 48, "png"), "png")
WAV = samples.render_tone(0.1, 440.0)
ZIP = samples.build_zip()
LIE = "The file's content (ZIP archive) does not match its declared type image/png."


# --------------------------------------------------------------------------- worker: decoding


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Read 4 KiB of base64 at a time: every boundary case happens in a small file."""
    monkeypatch.setattr(media_processing, "BASE64_CHUNK", 4096)


def decode(tmp_path: Path, text: bytes, expected: int | None = None) -> media_processing.StagedFile:
    source, target = tmp_path / "x.b64", tmp_path / "x.b64.decoded"
    source.write_bytes(text)
    return media_processing.decode_base64_file(source, target, expected_size=expected)


@pytest.mark.parametrize("size", [0, 1, 2, 3, 3071, 3072, 3073, 100_000])
@pytest.mark.parametrize("wrap", [False, True])
def test_decoding_a_staged_file(tmp_path: Path, small_chunks: None, size: int, wrap: bool):
    data = os.urandom(size)
    text = base64.encodebytes(data) if wrap else base64.b64encode(data)
    staged = decode(tmp_path, text, expected=size)
    assert staged.path.read_bytes() == data
    assert (staged.size, staged.sha256) == (size, hashlib.sha256(data).hexdigest())
    assert staged.head == data[: media_formats.HEAD_BYTES]


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
    assert media_storage.staging_file("a" * 32) == tmp_path / ("a" * 32)
    assert media_storage.staging_file("a" * 32 + ".b64") == tmp_path / ("a" * 32 + ".b64")
    for key in ("a" * 32 + ".b64.decoded", "a" * 32 + ".png", "../" + "a" * 32, "A" * 32):
        assert media_storage.staging_file(key) is None


# --------------------------------------------------------------------------- request path: inline


def test_inline_checks_accept_what_the_worker_accepts() -> None:
    assert media_images.inline_rejection(kind="image", declared="image/png", data=PNG) is None
    assert media_images.inline_rejection(kind="audio", declared="audio/wav", data=WAV) is None
    blob = b"\x00\x01anything"
    assert media_images.inline_rejection(kind="binary", declared="x/y", data=blob) is None


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
    found = media_images.inline_rejection(kind=kind, declared=declared, data=data)
    if reason is None:
        assert found is not None and found.startswith("The image data is damaged or incomplete")
    else:
        assert found == reason
    # The worker says the same about the same bytes.
    try:
        verified = media_formats.check_declared_type(
            data[: media_formats.HEAD_BYTES], declared=declared, kind=kind
        )
        if verified.signature and verified.signature.pillow_format:
            import io

            media_images.inspect_image(io.BytesIO(data), verified.signature.pillow_format)
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
    from chat.media.staging import stage_payload
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
        assert media_storage.staging_file(key) == staging / key


def test_normalize_result_defers_large_payloads_and_checks_inline_ones(
    staging: Path, settings
) -> None:
    from chat.media.staging import DEFER_DECODE_OVER, normalize_result

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


# --------------------------------------------------------------------------- stdio spool files


def test_a_spooled_payload_is_renamed_into_staging_not_rewritten(staging: Path) -> None:
    """The stdio transport's spool file becomes the staging file (same inode): the request
    path never reads, decodes or copies the payload."""
    payload = base64.b64encode(b"RIFF" + os.urandom(2 * 1024 * 1024)).decode()
    line = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 7,
            "result": {"content": [{"type": "audio", "mimeType": "audio/wav", "data": payload}]},
        }
    ).encode()
    splitter = LineSplitter(spool_dir=staging / SPOOL_SUBDIR)
    for start in range(0, len(line), 65536):
        splitter.feed(line[start : start + 65536])
    splitter.feed(b"\n")
    message = parse_message(splitter.next_line())
    raw = message.message.result
    (spool_file,) = (staging / SPOOL_SUBDIR).iterdir()
    inode = spool_file.stat().st_ino
    (part,) = normalize_result(raw).parts
    key = part["asset"]["stagingKey"]
    assert key.endswith(".b64") and part["size"] == 2 * 1024 * 1024 + 4
    staged = media_storage.staging_file(key)
    assert staged is not None and staged.stat().st_ino == inode
    assert staged.read_bytes() == payload.encode()
    assert list((staging / SPOOL_SUBDIR).iterdir()) == []
    # The marker was claimed: the same result normalized again names no file.
    (again,) = normalize_result(raw).parts
    assert again == {
        "type": "error",
        "code": "invalid_base64",
        "message": "Audio block has invalid base64 data.",
    }


@pytest.mark.django_db
def test_sweep_orphan_staging_removes_only_old_files_nobody_will_persist(
    staging: Path, django_user_model
) -> None:
    owner = django_user_model.objects.create(username="sweeper")
    workspace = services.workspace_create(name="Acme", owner=owner)
    thread = services.thread_create(workspace=workspace, title="Media", actor=owner)
    spool = staging / SPOOL_SUBDIR
    spool.mkdir(parents=True)
    old = time.time() - media_storage.MIN_ORPHAN_AGE - 60

    def put(path: Path, *, aged: bool = True) -> Path:
        path.write_bytes(b"x")
        if aged:
            os.utime(path, (old, old))
        return path

    waiting = put(staging / ("a" * 32 + ".b64"))
    MediaAsset.objects.create(
        thread=thread, kind="video", mime_type="video/mp4", staging_path=waiting.name
    )
    finished = put(staging / ("b" * 32))
    MediaAsset.objects.create(
        thread=thread,
        kind="image",
        mime_type="image/png",
        staging_path=finished.name,
        status=MediaStatus.READY,
    )
    kept = [
        waiting,
        put(staging / ("c" * 32 + ".b64"), aged=False),  # its transaction may be committing
        put(spool / ("d" * 32 + ".part"), aged=False),  # still being written
        put(staging / "notes.txt"),  # not ours
    ]
    swept = [
        finished,
        put(staging / ("e" * 32 + ".b64")),  # its transaction failed: no asset names it
        put(spool / ("f" * 32 + ".part")),  # nobody claimed it
        put(staging / ("1" * 32 + ".b64.decoded")),  # a killed worker's copy
    ]
    assert media_storage.sweep_orphan_staging(older_than=0) == len(swept)
    assert all(path.exists() for path in kept)
    assert not any(path.exists() for path in swept)
    assert media_storage.sweep_orphan_staging(older_than=0) == 0


@pytest.mark.django_db
def test_the_beat_schedule_runs_the_orphan_sweeper(staging: Path, settings) -> None:
    entry = next(
        e for e in settings.CELERY_BEAT_SCHEDULE.values() if e["task"].endswith("orphan_staging")
    )
    assert entry["task"] == "chat.tasks.sweep_orphan_staging"
    staging.mkdir(parents=True, exist_ok=True)
    orphan = staging / ("e" * 32 + ".b64")
    orphan.write_bytes(b"x")
    old = time.time() - tasks.ORPHAN_STAGING_AFTER - 60
    os.utime(orphan, (old, old))
    fresh = staging / ("c" * 32 + ".b64")
    fresh.write_bytes(b"x")
    assert tasks.sweep_orphan_staging.apply().get() == 1
    assert not orphan.exists() and fresh.exists()


@pytest.mark.django_db
def test_persisting_audits_in_its_transaction_and_removes_staging_on_commit(
    staging: Path, settings, django_user_model, django_capture_on_commit_callbacks
) -> None:
    settings.MEDIA_ROOT = str(staging.parent / "media")
    owner = django_user_model.objects.create(username="persister")
    workspace = services.workspace_create(name="Acme", owner=owner)
    thread = services.thread_create(workspace=workspace, title="Media", actor=owner)
    staging.mkdir(parents=True, exist_ok=True)
    key = "a" * 32 + ".b64"
    (staging / key).write_bytes(base64.b64encode(WAV))
    asset = MediaAsset.objects.create(
        thread=thread, kind="audio", mime_type="audio/wav", size=len(WAV), staging_path=key
    )
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert media_services.media_asset_persist(asset_id=asset.pk) == "ready"
    # Recorded, audited and announced in the transaction; the file goes only on commit.
    asset.refresh_from_db()
    assert asset.status == MediaStatus.READY and asset.sha256 == hashlib.sha256(WAV).hexdigest()
    assert AuditEvent.objects.filter(
        event_type=AuditEventType.MEDIA_READY, thread_id=thread.pk
    ).exists()
    assert ThreadEvent.objects.filter(thread=thread, kind="media").exists()
    assert (staging / key).exists() and not (staging / (key + ".decoded")).exists()
    for callback in callbacks:
        callback()
    assert not (staging / key).exists()
