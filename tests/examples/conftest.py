"""Fixtures for the example-server tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from mcp import Client

from tests.examples.support import ClientOwner, stdio_client


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def module_client(request: pytest.FixtureRequest) -> AsyncIterator[Client]:
    """A stdio connection shared by a module; the module sets `SERVER = (name, *args)`."""
    name, *args = request.module.SERVER
    owner = ClientOwner(stdio_client(name, *args))
    client = await owner.start()
    try:
        yield client
    finally:
        await owner.stop()
