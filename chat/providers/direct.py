"""The ``direct`` provider: no model. People drive tools with commands and the tool picker.

``chat.agent.start_turn`` never calls it (a direct workspace has no turns); it exists so
that every provider name resolves to an object with the same interface.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from .base import Finish, ProviderConfig, ProviderEvent, ProviderRequest


class DirectProvider:
    def __init__(self, config: ProviderConfig) -> None:
        self.config = config

    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        yield Finish(reason="stop")
