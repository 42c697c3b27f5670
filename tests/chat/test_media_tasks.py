"""persist_tool_media with a REAL Celery worker (the project's app, a memory:// broker, a solo
worker thread): staged results from the real request-path function (`tool_call_finish`)
become ready or rejected, the stored result and the events tell the same story, and nothing
is lost or done twice."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from chat.media import formats as media_formats
from chat.media import services as media_services
from chat.media import storage as media_storage
from chat.media.tasks import persist_tool_media
from examples.media import server as samples
from tests import factories
from tests.waiting import WaitTimeout, poll

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PNG = samples.encode_image(samples.render_picture(1600, 900, "png"), "png")
SMALL_PNG = samples.encode_image(samples.render_picture(64, 48, "png"), "png")  # inlined
WAV = samples.render_tone(2.0, 440.0)
AVI = samples.build_avi(samples.render_frames(24, 320, 240), 320, 240, fps=12)
BLOB = samples.sample_bytes(16 * 1024)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def image_block(data: bytes, mime: str = "image/png") -> dict[str, Any]:
    return {"type": "image", "data": b64(data), "mimeType": mime}


def resource_block(data: bytes, mime: str, uri: str) -> dict[str, Any]:
    return {"type": "resource", "resource": {"uri": uri, "mimeType": mime, "blob": b64(data)}}


EVERY_KIND = [
    {"type": "text", "text": "one of each"},
    image_block(PNG),
    {"type": "audio", "data": b64(WAV), "mimeType": "audio/wav"},
    resource_block(AVI, "video/x-msvideo", "media://video/clip.avi"),
    resource_block(BLOB, "application/octet-stream", "media://files/sample.bin"),
]


@dataclass
class World:
    owner: Any
    thread: Any


@pytest.fixture
def world() -> World:
    """One owner and a thread."""
    owner = factories.UserFactory(username="olivia")
    thread = factories.ThreadFactory(title="Media", actor=owner, workspace__owner=owner)
    return World(owner=owner, thread=thread)


@pytest.fixture
def media_settings(settings, tmp_path: Path):
    settings.MEDIA_ROOT = str(tmp_path / "media")
    settings.MEDIA_STAGING_ROOT = str(tmp_path / "staging")
    settings.ATRIUM_MEDIA_INLINE_LIMIT = 256  # everything but tiny payloads goes to staging
    return settings


def _reset_broker_pools(app: Any) -> None:
    """Forget cached broker connections, so the next publish uses the current broker_url."""
    from kombu import pools

    pools.reset()
    app._pool = None
    app.amqp._producer_pool = None


@pytest.fixture(scope="module")
def module_worker(django_db_setup, django_db_blocker) -> Iterator[Any]:
    """A real worker thread of the project's Celery app on an in-memory broker, shared by
    the module (starting and stopping one costs seconds). The test database must exist
    before the worker's thread opens a connection."""
    from celery.contrib.testing.worker import start_worker

    import chat.media.tasks  # noqa: F401  (registers the tasks)
    from config.celery import app

    keys = ("broker_url", "broker_read_url", "broker_write_url", "broker_transport_options")
    saved = {key: app.conf.get(key) for key in keys}
    _reset_broker_pools(app)
    # Read/write URLs too: they win over a CELERY_BROKER_URL environment variable (the
    # production profile sets one), broker_url does not.
    app.conf.update(
        broker_url="memory://",
        broker_read_url="memory://",
        broker_write_url="memory://",
        broker_transport_options={},
    )
    # Earlier in-process tests published into the same in-memory broker (conftest) with no
    # worker: those messages name rows of other tests, not ours.
    app.control.purge()
    try:
        with (
            django_db_blocker.unblock(),
            start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=20),
        ):
            yield app
    finally:
        _reset_broker_pools(app)
        app.conf.update(saved)


@pytest.fixture
def worker(module_worker, media_settings) -> Any:
    return module_worker


@pytest.fixture
def media_call(world, media_settings) -> Callable[..., Any]:
    """Finish a tool call with the given content through the real request path."""
    from chat.calls.finish import tool_call_finish
    from chat.models import ToolCall
    from mcp_bridge.services.servers import server_add

    server = server_add(
        name="Media",
        slug="media",
        transport="stdio",
        command=sys.executable,
        args=[str(ROOT / "examples" / "media" / "server.py")],
    )

    def finish(content: list[dict[str, Any]], tool: str = "get_everything") -> ToolCall:
        call = ToolCall.objects.create(
            thread=world.thread,
            server=server,
            tool_name=tool,
            origin="user",
            requested_by=world.owner,
        )
        return tool_call_finish(
            call_id=call.pk, raw={"content": content}, latency_ms=5.0, app_resource=None
        )

    return finish


def wait_settled(call: Any, timeout: float = 30.0) -> list[Any]:
    """The call's assets once none is staged any more."""
    from chat.media.models import MediaAsset

    def settled() -> list[Any]:
        assets = list(MediaAsset.objects.filter(tool_call=call).order_by("id"))
        return assets if assets and all(a.status != "staged" for a in assets) else []

    # Polled: the worker thread's commits reach the test only through the database.
    return poll(settled, timeout=timeout, reason=f"call {call.pk}'s media leave staging")


def staged_files(settings, timeout: float = 5.0) -> list[Path]:
    """What is left in staging once the worker's after-commit cleanup ran (or ``timeout``)."""
    staging = Path(settings.MEDIA_STAGING_ROOT)
    # Polled: a file's removal by the worker thread announces nothing. On a timeout the
    # caller asserts on what is left.
    with contextlib.suppress(WaitTimeout):
        poll(lambda: not any(staging.glob("*")), timeout=timeout, reason="staging empties")
    return sorted(staging.glob("*"))


def stored_bytes(name: str) -> bytes:
    from django.core.files.storage import default_storage

    with default_storage.open(name, "rb") as handle:
        return handle.read()


def test_media_urls_are_wired() -> None:
    from django.urls import reverse

    assert reverse("media-asset", kwargs={"asset_id": 7}) == "/media/7/"
    assert reverse("media-thumbnail", kwargs={"asset_id": 7}) == "/media/7/thumbnail/"
    assert reverse("media-poster", kwargs={"asset_id": 7}) == "/media/7/poster/"


def test_task_is_configured_for_at_least_once_delivery() -> None:
    from config.celery import app

    assert persist_tool_media.name == "chat.tasks.persist_tool_media"
    assert persist_tool_media.acks_late and persist_tool_media.reject_on_worker_lost
    assert persist_tool_media.max_retries == 5 and persist_tool_media.retry_backoff
    assert OSError in persist_tool_media.autoretry_for
    assert persist_tool_media.soft_time_limit and persist_tool_media.time_limit
    assert app.conf.task_serializer == "json" and app.conf.accept_content == ["json"]


def test_worker_persists_every_kind_and_the_result_tells_the_same_story(
    worker, media_call, media_settings
):
    from audit.models import AuditEvent
    from audit.types import AuditEventType
    from chat.models import ThreadEvent
    from chat.presenters import serialize_tool_call
    from chat.selectors import tool_calls_queryset

    call = media_call(EVERY_KIND)
    placeholders = [p["asset"] for p in call.result["parts"] if "asset" in p]
    assert [a["status"] for a in placeholders] == ["staged"] * 4

    image, audio, video, blob = wait_settled(call)
    assert [a.status for a in (image, audio, video, blob)] == ["ready"] * 4
    for asset, data in ((image, PNG), (audio, WAV), (video, AVI), (blob, BLOB)):
        digest = hashlib.sha256(data).hexdigest()
        assert asset.sha256 == digest and asset.size == len(data)
        assert asset.storage_path == f"sha256/{digest[:2]}/{digest[2:4]}/{digest}"
        assert stored_bytes(asset.storage_path) == data
        assert asset.attempts >= 1
    assert (image.width, image.height, image.thumbnail_path != "") == (1600, 900, True)
    assert audio.duration == 2.0
    assert (video.width, video.height, video.duration) == (320, 240, 2.0)
    assert video.poster_path and video.thumbnail_path
    assert staged_files(media_settings) == []  # staging is cleaned up after the commit

    fresh = tool_calls_queryset().get(pk=call.pk)
    parts = [p for p in fresh.result["parts"] if "asset" in p]
    assert parts[0]["asset"] == {
        "id": image.pk,
        "status": "ready",
        "url": f"/media/{image.pk}/",
        "thumbnailUrl": f"/media/{image.pk}/thumbnail/",
        "posterUrl": None,
        "width": 1600,
        "height": 900,
        "duration": None,
        "size": len(PNG),
        "reason": None,
    }
    assert parts[2]["asset"]["posterUrl"] == f"/media/{video.pk}/poster/"
    resources = fresh.result["resources"]
    assert [r["status"] for r in resources] == ["ready"] * 4
    assert resources[0]["uri"] == f"/media/{image.pk}/"  # an image block has no URI of its own
    assert resources[2]["uri"] == "media://video/clip.avi" and resources[2]["duration"] == 2.0

    events = list(ThreadEvent.objects.filter(thread=call.thread).order_by("seq"))
    media_events = {e.payload["id"]: e.payload for e in events if e.kind == "media"}
    assert set(media_events) == {image.pk, audio.pk, video.pk, blob.pk}
    assert media_events[audio.pk] == {**parts[1]["asset"], "toolCallId": call.pk}
    last_call_event = [e for e in events if e.kind == "toolcall"][-1]
    # A reload renders exactly what the last live event carried.
    assert last_call_event.payload == serialize_tool_call(fresh)

    audits = AuditEvent.objects.filter(event_type=AuditEventType.MEDIA_READY)
    assert sorted(a.extra["asset_id"] for a in audits) == [image.pk, audio.pk, video.pk, blob.pk]
    assert {a.thread_id for a in audits} == {call.thread_id}


def test_bombs_and_lies_are_rejected_with_a_reason(worker, media_call, media_settings):
    from django.core.files.storage import default_storage

    from audit.models import AuditEvent
    from audit.types import AuditEventType
    from chat.models import ThreadEvent

    call = media_call(
        [
            image_block(samples.build_png_bomb(50_000)),
            image_block(samples.build_zip()),
            resource_block(samples.build_zip(), "image/png", "media://files/photo.png"),
        ]
    )
    bomb, lie, lying_resource = wait_settled(call)
    assert bomb.status == "rejected"
    assert bomb.reason == (
        "The image is larger than 50 megapixels (50000 × 50000 pixels; "
        "decompression bomb protection)."
    )
    lie_reason = "The file's content (ZIP archive) does not match its declared type image/png."
    assert lie.reason == lying_resource.reason == lie_reason
    call.refresh_from_db()
    stored = [p["asset"] for p in call.result["parts"] if "asset" in p]
    assert [(a["status"], a["url"], a["reason"]) for a in stored] == [
        ("rejected", None, bomb.reason),
        ("rejected", None, lie_reason),
        ("rejected", None, lie_reason),
    ]
    media = [e.payload for e in ThreadEvent.objects.filter(kind="media").order_by("seq")]
    assert [m["reason"] for m in media] == [bomb.reason, lie_reason, lie_reason]
    rejected = AuditEvent.objects.filter(event_type=AuditEventType.MEDIA_REJECTED)
    assert rejected.count() == 3 and {a.decision for a in rejected} == {"denied"}
    assert staged_files(media_settings) == []
    assert not default_storage.exists("sha256")  # nothing rejected was stored


def test_a_second_run_does_nothing_and_equal_content_is_stored_once(
    worker, media_call, media_settings
):
    from chat.models import ThreadEvent

    first = media_call([image_block(PNG)])
    second = media_call([image_block(PNG)])
    (a,) = wait_settled(first)
    (b,) = wait_settled(second)
    assert a.storage_path == b.storage_path and a.thumbnail_path == b.thumbnail_path
    stored = [p for p in Path(media_settings.MEDIA_ROOT).rglob("*") if p.is_file()]
    assert len(stored) == 2  # one original + one thumbnail, shared by both assets

    last_event = ThreadEvent.objects.order_by("-id").values_list("id", flat=True).first()
    persist_tool_media.delay(a.pk)  # a duplicate message (redelivery, requeue)
    assert media_services.media_asset_persist(asset_id=b.pk) == "skipped"
    # No sleep to prove nothing happened: the solo worker takes messages in order, so once a
    # later call's media settled, the duplicate has been handled.
    marker = media_call([image_block(PNG)])
    wait_settled(marker)
    a.refresh_from_db()
    assert a.status == "ready" and a.attempts == 1
    later = ThreadEvent.objects.filter(id__gt=last_event)
    about = {(e.payload.get("toolCallId") or e.payload.get("id")) for e in later}
    assert about <= {marker.pk}, [(e.kind, e.payload) for e in later]


def test_a_transient_storage_failure_is_retried(worker, media_call, monkeypatch):
    real_store = media_storage.store_in_default_storage
    failures: list[str] = []

    def flaky_store(name: str, **kwargs: Any) -> str:
        if not failures:
            failures.append(name)
            raise OSError("storage unavailable")
        return real_store(name, **kwargs)

    monkeypatch.setattr(media_storage, "store_in_default_storage", flaky_store)
    (asset,) = wait_settled(media_call([image_block(PNG)]))
    assert failures and asset.status == "ready" and asset.attempts == 2


def test_requeue_media_re_enqueues_only_old_staged_assets(world, worker, media_settings):
    from datetime import timedelta

    from django.utils import timezone

    from chat.media.models import MediaAsset
    from chat.media.staging import stage_payload
    from mcp_bridge.normalize import StagedPayload

    def staged(age: float) -> MediaAsset:
        descriptor = stage_payload(StagedPayload(kind="audio", mime_type="audio/wav", data=WAV))
        asset = MediaAsset.objects.create(
            thread=world.thread,
            kind="audio",
            mime_type="audio/wav",
            size=len(WAV),
            staging_path=descriptor["stagingKey"],
        )
        MediaAsset.objects.filter(pk=asset.pk).update(
            created_at=timezone.now() - timedelta(seconds=age)
        )
        return asset

    # The broker lost these messages: nothing was ever enqueued for them.
    old, young = staged(3600), staged(1)
    call_command("requeue_media", "--older-than", "600", "--dry-run")
    # No sleep to prove the dry run enqueued nothing: a later message (the solo worker takes
    # them in order) settles first, then the old asset must still be staged.
    marker = staged(1)
    persist_tool_media.delay(marker.pk)
    poll(
        lambda: MediaAsset.objects.get(pk=marker.pk).status != "staged",
        timeout=20,
        reason="the worker's commit reaches the test only through the database",
    )
    assert MediaAsset.objects.get(pk=old.pk).status == "staged"

    call_command("requeue_media", "--older-than", "600")
    poll(
        lambda: MediaAsset.objects.get(pk=old.pk).status != "staged",
        timeout=20,
        reason="the worker's commit reaches the test only through the database",
    )
    old.refresh_from_db()
    young.refresh_from_db()
    assert old.status == "ready" and old.duration == 2.0
    assert young.status == "staged" and young.attempts == 0


def test_a_missing_staging_file_is_retried_then_rejected(world, media_settings):
    from chat.media.models import MediaAsset

    asset = MediaAsset.objects.create(
        thread=world.thread, kind="image", mime_type="image/png", staging_path="f" * 32
    )
    with pytest.raises(media_formats.TransientMediaError):
        media_services.media_asset_persist(asset_id=asset.pk)
    assert media_services.media_asset_persist(asset_id=asset.pk, final_attempt=True) == "rejected"
    asset.refresh_from_db()
    assert asset.reason == (
        "The staged file is no longer available, so the media could not be stored."
    )
    assert asset.attempts == 2


def test_an_asset_that_keeps_failing_is_rejected_after_the_attempt_limit(world, media_settings):
    from chat.media.models import MediaAsset

    asset = MediaAsset.objects.create(
        thread=world.thread,
        kind="image",
        mime_type="image/png",
        staging_path="e" * 32,
        attempts=media_services.MAX_ATTEMPTS,
    )
    assert media_services.media_asset_persist(asset_id=asset.pk) == "rejected"
    asset.refresh_from_db()
    assert asset.reason == "The media could not be processed after 10 attempts."


def test_a_large_payload_is_staged_undecoded_and_the_worker_decodes_it(
    worker, media_call, media_settings
):
    """Above chat.media.staging.DEFER_DECODE_OVER the request path stages the base64 text as is;
    the worker decodes it (strictly), stores the bytes, and cleans up both files."""
    from chat.media.models import MediaAsset
    from chat.media.staging import DEFER_DECODE_OVER

    video = samples.build_large_avi(DEFER_DECODE_OVER + 64 * 1024)
    call = media_call([resource_block(video, "video/x-msvideo", "media://video/big.avi")])
    (placeholder,) = [p["asset"] for p in call.result["parts"] if "asset" in p]
    assert placeholder == {"id": placeholder["id"], "status": "staged", "size": len(video)}
    assert MediaAsset.objects.get(pk=placeholder["id"]).staging_path.endswith(".b64")

    (asset,) = wait_settled(call)
    assert asset.status == "ready", asset.reason
    assert asset.sha256 == hashlib.sha256(video).hexdigest() and asset.size == len(video)
    assert stored_bytes(asset.storage_path) == video
    assert (asset.width, asset.height) == (640, 360) and asset.poster_path
    assert staged_files(media_settings) == []  # the .b64 file and the decoded copy


def test_invalid_base64_of_a_large_payload_is_rejected_by_the_worker(
    worker, media_call, media_settings
):
    from chat.media.staging import DEFER_DECODE_OVER

    text = "*" * (4 * (DEFER_DECODE_OVER // 3 + 8))  # right length, wrong alphabet
    resource = {"uri": "media://files/x.bin", "mimeType": "application/octet-stream"}
    call = media_call([{"type": "resource", "resource": {**resource, "blob": text}}])
    (asset,) = wait_settled(call)
    assert asset.status == "rejected"
    assert asset.reason == "The media's data is not valid base64, so it was not stored."
    assert staged_files(media_settings) == []


def test_small_inline_media_is_type_checked_on_the_request_path(media_call, media_settings):
    """Inlined payloads never reach the worker: the request path applies its checks."""
    from chat.media.models import MediaAsset

    media_settings.ATRIUM_MEDIA_INLINE_LIMIT = 64 * 1024
    call = media_call([image_block(samples.build_zip()), image_block(SMALL_PNG)])
    lie, fine = call.result["parts"]
    assert lie == {
        "type": "error",
        "code": "media_rejected",
        "message": "The file's content (ZIP archive) does not match its declared type image/png.",
    }
    assert fine["type"] == "image" and fine["src"].startswith("data:image/png;base64,")
    assert not MediaAsset.objects.exists()


def test_in_process_tests_publish_to_an_in_memory_broker(media_call, media_settings):
    """tests/conftest.py: nothing is left in var/celery (or a developer's Redis) by tests
    that run no worker."""
    from django.conf import settings

    from config.celery import app

    assert app.conf.broker_write_url == app.conf.broker_read_url == "memory://"
    queue = Path(settings.CELERY_DATA_DIR) / "queue"
    before = sorted(queue.glob("*")) if queue.exists() else []
    call = media_call([image_block(PNG)])  # staged: a message is published on commit
    assert [p["asset"]["status"] for p in call.result["parts"] if "asset" in p] == ["staged"]
    after = sorted(queue.glob("*")) if queue.exists() else []
    assert after == before
    with app.connection_for_write() as connection:
        assert connection.transport.driver_type == "memory"
