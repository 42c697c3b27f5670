"""Model providers behind one streaming interface (see :mod:`chat.providers.base`).

``chat.providers.registry`` lists them. ``config_for(workspace)`` resolves the workspace's
provider settings over the ``ATRIUM_PROVIDER*`` / ``ATRIUM_MODEL`` defaults;
``provider_for(config)`` builds the provider.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, register

from .base import Provider, ProviderConfig, ProviderError
from .registry import DIRECT, provider_entry, provider_names


def config_for(workspace: Any) -> ProviderConfig:
    """The workspace's settings, each empty field falling back to the environment default."""
    kind = (getattr(workspace, "provider", "") or settings.ATRIUM_PROVIDER or DIRECT).strip()
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
    entry = provider_entry(config.kind)
    if entry is None:
        raise ProviderError(
            "unknown_provider",
            f"Unknown model provider '{config.kind[:40]}' (use {provider_names()}).",
        )
    return entry.build(config)


@register()
def check_provider_setting(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """``ATRIUM_PROVIDER`` names a known provider (or is empty: ``direct``)."""
    kind = (settings.ATRIUM_PROVIDER or DIRECT).strip().lower()
    if provider_entry(kind) is not None:
        return []
    return [
        Error(
            f"ATRIUM_PROVIDER names an unknown model provider '{kind[:40]}'.",
            hint=f"Set ATRIUM_PROVIDER to {provider_names()}.",
            id="chat.E001",
        )
    ]


__all__ = [
    "ProviderConfig",
    "ProviderError",
    "check_provider_setting",
    "config_for",
    "provider_for",
]
