"""Serving persisted media through the real ASGI stack (Django's AsyncClient): members only,
byte ranges, headers that keep the browser from guessing, and streamed bodies."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import AsyncClient
from PIL import Image

from chat.media import services as media_services
from chat.media.views import content_disposition, parse_range, safe_filename
from examples.media import server as samples
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)

WAV = samples.render_tone(1.0, 440.0)
PNG = samples.encode_image(samples.render_picture(1200, 800, "served"), "png")
AVI = samples.build_avi(samples.render_frames(6, 160, 120), 160, 120, fps=6)
BLOB = samples.sample_bytes(4096)


@dataclass
class World:
    owner: Any
    viewer: Any
    outsider: Any
    thread: Any


@pytest.fixture
def world(settings, tmp_path: Path) -> World:
    settings.MEDIA_ROOT = str(tmp_path / "media")
    settings.MEDIA_STAGING_ROOT = str(tmp_path / "staging")
    owner, viewer, outsider = (
        factories.UserFactory(username=n) for n in ("olivia", "vera", "oscar")
    )
    workspace = factories.WorkspaceFactory(name="Acme", owner=owner)
    factories.MembershipFactory(workspace=workspace, user=viewer, role="viewer")
    factories.WorkspaceFactory(name="Globex", owner=outsider)
    thread = factories.ThreadFactory(workspace=workspace, title="Media", actor=owner)
    return World(owner=owner, viewer=viewer, outsider=outsider, thread=thread)


def persisted(world: World, data: bytes, kind: str, mime: str, filename: str = "") -> Any:
    """An asset staged like the request path does, then persisted like the worker does."""
    from chat.media.models import MediaAsset
    from chat.media.staging import stage_payload
    from mcp_bridge.normalize import StagedPayload

    staged = stage_payload(StagedPayload(kind=kind, mime_type=mime, data=data))
    asset = MediaAsset.objects.create(
        thread=world.thread,
        kind=kind,
        mime_type=mime,
        filename=filename,
        size=len(data),
        staging_path=staged["stagingKey"],
    )
    media_services.media_asset_persist(asset_id=asset.pk)
    asset.refresh_from_db()
    return asset


async def client_for(user: Any) -> AsyncClient:
    client = AsyncClient()
    if user is not None:
        await client.aforce_login(user)
    return client


async def body(response: Any) -> bytes:
    assert response.streaming, "media must be streamed, never built in memory"
    return b"".join([chunk async for chunk in response.streaming_content])


async def test_members_get_the_file_with_safe_headers(world):
    asset = await database_sync_to_async(persisted)(world, WAV, "audio", "audio/wav", "tone.wav")
    for user in (world.owner, world.viewer):
        response = await (await client_for(user)).get(f"/media/{asset.pk}/")
        assert response.status_code == 200
        assert await body(response) == WAV
    assert response["Content-Type"] == "audio/wav"
    assert response["Content-Length"] == str(len(WAV))
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Disposition"] == 'inline; filename="tone.wav"'
    assert response["Cache-Control"] == "private, max-age=31536000, immutable"
    assert response["ETag"] == f'"{asset.sha256}"'
    assert response["Accept-Ranges"] == "bytes"
    csp = response["Content-Security-Policy"]
    assert "sandbox" in csp and "default-src 'none'" in csp and "script-src" not in csp


async def test_behind_nginx_the_view_decides_and_nginx_sends_the_file(world, settings):
    settings.ATRIUM_MEDIA_ACCEL_REDIRECT = "/_media_files/"
    asset = await database_sync_to_async(persisted)(world, WAV, "audio", "audio/wav", "tone.wav")
    owner = await client_for(world.owner)
    for headers in ({}, {"Range": "bytes=0-11"}):
        response = await owner.get(f"/media/{asset.pk}/", headers=headers)
        assert response.status_code == 200 and response.content == b""
        assert response["X-Accel-Redirect"] == f"/_media_files/{asset.storage_path}"
        # The headers nginx copies onto the file it sends (deploy/nginx/fleet.conf).
        assert response["Content-Type"] == "audio/wav"
        assert response["Content-Disposition"] == 'inline; filename="tone.wav"'
        assert response["ETag"] == f'"{asset.sha256}"'
        assert response["X-Content-Type-Options"] == "nosniff"
        assert "sandbox" in response["Content-Security-Policy"]
        assert "Content-Range" not in response and "Accept-Ranges" not in response
    # Access, 304 and 416 are still this view's answers.
    etag = f'"{asset.sha256}"'
    assert (
        await owner.get(f"/media/{asset.pk}/", headers={"If-None-Match": etag})
    ).status_code == 304
    unsatisfiable = await owner.get(f"/media/{asset.pk}/", headers={"Range": f"bytes={len(WAV)}-"})
    assert unsatisfiable.status_code == 416 and "X-Accel-Redirect" not in unsatisfiable
    outsider = await client_for(world.outsider)
    assert (await outsider.get(f"/media/{asset.pk}/")).status_code == 404


async def test_outsiders_anonymous_and_unfinished_media_get_404(world):

    ready = await database_sync_to_async(persisted)(world, PNG, "image", "image/png")
    rejected = await database_sync_to_async(persisted)(
        world, b"PK\x03\x04zip", "image", "image/png"
    )
    staged = await database_sync_to_async(factories.MediaAssetFactory)(
        thread=world.thread, kind="image", mime_type="image/png", staging_path="a" * 32
    )
    assert rejected.status == "rejected"
    outsider, anonymous = await client_for(world.outsider), await client_for(None)
    for client in (outsider, anonymous):
        for url in (f"/media/{ready.pk}/", f"/media/{ready.pk}/thumbnail/"):
            assert (await client.get(url)).status_code == 404
    owner = await client_for(world.owner)
    assert (await owner.get(f"/media/{ready.pk}/")).status_code == 200
    for asset_id in (rejected.pk, staged.pk, 999_999):
        assert (await owner.get(f"/media/{asset_id}/")).status_code == 404
    assert (await owner.get(f"/media/{ready.pk}/poster/")).status_code == 404  # none made
    assert (await owner.post(f"/media/{ready.pk}/")).status_code == 405


async def test_byte_ranges(world):
    asset = await database_sync_to_async(persisted)(world, AVI, "video", "video/x-msvideo")
    client = await client_for(world.owner)
    url, size = f"/media/{asset.pk}/", len(AVI)

    first = await client.get(url, headers={"Range": "bytes=0-99"})
    assert first.status_code == 206
    assert first["Content-Range"] == f"bytes 0-99/{size}" and first["Content-Length"] == "100"
    assert await body(first) == AVI[:100]

    tail = await client.get(url, headers={"Range": "bytes=-64"})
    assert tail["Content-Range"] == f"bytes {size - 64}-{size - 1}/{size}"
    assert await body(tail) == AVI[-64:]

    rest = await client.get(url, headers={"Range": "bytes=1000-"})
    assert await body(rest) == AVI[1000:]

    beyond = await client.get(url, headers={"Range": f"bytes={size}-"})
    assert beyond.status_code == 416 and beyond["Content-Range"] == f"bytes */{size}"

    several = await client.get(url, headers={"Range": "bytes=0-1,5-9"})
    assert several.status_code == 200 and await body(several) == AVI

    stale = await client.get(url, headers={"Range": "bytes=0-9", "If-Range": '"other"'})
    assert stale.status_code == 200

    cached = await client.get(url, headers={"If-None-Match": f'"{asset.sha256}"'})
    assert cached.status_code == 304

    head = await client.head(url, headers={"Range": "bytes=10-19"})
    assert head.status_code == 206 and head["Content-Length"] == "10"


async def test_images_thumbnails_and_posters(world):
    image = await database_sync_to_async(persisted)(world, PNG, "image", "image/png")
    video = await database_sync_to_async(persisted)(world, AVI, "video", "video/x-msvideo")
    client = await client_for(world.owner)
    thumbnail = await client.get(f"/media/{image.pk}/thumbnail/")
    assert thumbnail["Content-Type"] == "image/webp"
    assert thumbnail["ETag"] == f'"{image.sha256}-thumbnail"'
    assert Image.open(io.BytesIO(await body(thumbnail))).size == (320, 213)
    poster = await client.get(f"/media/{video.pk}/poster/")
    assert poster.status_code == 200 and poster["Content-Type"] == "image/webp"
    assert Image.open(io.BytesIO(await body(poster))).size == (160, 120)
    original = await client.get(f"/media/{image.pk}/")
    assert original["Content-Type"] == "image/png"
    assert original["Content-Disposition"] == f'inline; filename="image-{image.pk}.png"'


async def test_other_files_download_as_opaque_attachments(world):
    asset = await database_sync_to_async(persisted)(
        world, BLOB, "binary", "text/html", "../../Rapport été<script>.html"
    )
    response = await (await client_for(world.owner)).get(f"/media/{asset.pk}/")
    assert response["Content-Type"] == "application/octet-stream"  # never rendered
    assert response["Content-Disposition"] == (
        'attachment; filename="Rapport ete_script_.html"; '
        "filename*=UTF-8''Rapport%20%C3%A9t%C3%A9_script_.html"
    )
    assert await body(response) == BLOB


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("bytes=0-0", (0, 0)),
        ("bytes=5-", (5, 99)),
        ("bytes=-10", (90, 99)),
        ("bytes=-500", (0, 99)),
        ("bytes=90-500", (90, 99)),
        ("bytes=100-", "unsatisfiable"),
        ("bytes=-0", "unsatisfiable"),
        ("bytes=9-3", None),
        ("bytes=a-b", None),
        ("items=0-5", None),
        ("bytes=0-1,3-4", None),
    ],
)
def test_parse_range(header: str, expected: Any) -> None:
    assert parse_range(header, 100) == expected


def test_filenames_are_sanitized() -> None:
    assert safe_filename("../etc/passwd", "x") == "passwd"
    assert safe_filename('a"b;c\r\nd.txt', "x") == "a_b_c_d.txt"
    assert safe_filename("...", "fallback.bin") == "fallback.bin"
    assert content_disposition("attachment", "report.pdf") == 'attachment; filename="report.pdf"'
    assert content_disposition("inline", "日本.png") == (
        "inline; filename=\"download.png\"; filename*=UTF-8''%E6%97%A5%E6%9C%AC.png"
    )
