"""Model providers behind one streaming interface (see :mod:`chat.providers.base`).

``config_for(workspace)`` resolves the workspace's provider settings over the
``ATRIUM_PROVIDER*`` / ``ATRIUM_MODEL`` defaults; ``provider_for(config)`` builds the
provider. Adding a provider means one module with a ``stream(request)`` async generator.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from .anthropic import AnthropicProvider
from .base import Provider, ProviderConfig, ProviderError
from .direct import DirectProvider
from .openai import OpenAIProvider

PROVIDERS: dict[str, type] = {
    "direct": DirectProvider,
    "openai": OpenAIProvider,
    "anthropic": AnthropicProvider,
}


def config_for(workspace: Any) -> ProviderConfig:
    """The workspace's settings, each empty field falling back to the environment default."""
    kind = (getattr(workspace, "provider", "") or settings.ATRIUM_PROVIDER or "direct").strip()
    own_base_url = (getattr(workspace, "provider_base_url", "") or "").strip()
    own_key = (getattr(workspace, "provider_api_key", "") or "").strip()
    # The deployment's key goes only to the deployment's endpoint: a workspace that points
    # the provider elsewhere brings its own key (or sends none), so a workspace admin cannot
    # collect the global key with a URL they control.
    fallback_key = "" if own_base_url else (settings.ATRIUM_PROVIDER_API_KEY or "")
    return ProviderConfig(
        kind=kind.lower(),
        model=(getattr(workspace, "model", "") or settings.ATRIUM_MODEL or "").strip(),
        base_url=own_base_url or (settings.ATRIUM_PROVIDER_BASE_URL or "").strip(),
        api_key=own_key or fallback_key.strip(),
    )


def provider_for(config: ProviderConfig) -> Provider:
    cls = PROVIDERS.get(config.kind)
    if cls is None:
        raise ProviderError(
            "unknown_provider",
            f"Unknown model provider '{config.kind[:40]}' (use direct, openai or anthropic).",
        )
    return cls(config)


__all__ = ["PROVIDERS", "ProviderConfig", "ProviderError", "config_for", "provider_for"]
