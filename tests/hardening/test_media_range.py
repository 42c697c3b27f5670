"""Finding 10 (server side): a hostile Range header is ignored, never a 500 (issue 13)."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from tests.chat.test_media_views import BLOB, body, client_for, persisted, world  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize(
    "header",
    [
        "bytes=" + "9" * 5000 + "-",  # past int()'s 4,300-digit limit
        "bytes=0-" + "9" * 5000,
        "bytes=-" + "9" * 5000,
        "bytes=0-1" + " " * 10_000,
    ],
)
async def test_hostile_range_headers_get_the_whole_file(world, header):  # noqa: F811
    asset = await database_sync_to_async(persisted)(
        world, BLOB, "binary", "application/octet-stream"
    )
    client = await client_for(world.owner)
    response = await client.get(f"/media/{asset.pk}/", headers={"Range": header})
    assert response.status_code == 200
    assert await body(response) == BLOB
