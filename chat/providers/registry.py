"""The model providers Atrium knows, in one table.

An entry's ``name`` is what a workspace stores (``Workspace.provider``) and what
``ATRIUM_PROVIDER`` says. Everything else that lists providers derives from ``PROVIDERS``:
the workspace field's choices (and so the admin's select), the settings check
(``chat.providers.check_provider_setting``), the unknown-provider error, and the README's list
(``tests/chat/test_providers_unit.py`` checks it). Adding a provider is one module with a
``stream(request)`` async generator (``chat.providers.base``) and one entry here.

No Django here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .anthropic import AnthropicProvider
from .base import Provider, ProviderConfig
from .direct import DirectProvider
from .openai import OpenAIProvider

__all__ = ["DIRECT", "PROVIDERS", "ProviderEntry", "provider_choices", "provider_entry"]


@dataclass(frozen=True)
class ProviderEntry:
    name: str  # stored in Workspace.provider; the value of ATRIUM_PROVIDER
    label: str  # the admin's choice
    build: Callable[[ProviderConfig], Provider]


# The embedded default: no model (people drive tools with slash commands and the tool
# picker), so a workspace on it has no turns.
DIRECT = "direct"

PROVIDERS: tuple[ProviderEntry, ...] = (
    ProviderEntry(DIRECT, "direct (no model)", DirectProvider),
    # Chat Completions: OpenAI, vLLM, Ollama, llama.cpp server…
    ProviderEntry("openai", "OpenAI-compatible", OpenAIProvider),
    ProviderEntry("anthropic", "Anthropic", AnthropicProvider),
)

_BY_NAME = {entry.name: entry for entry in PROVIDERS}


def provider_entry(name: str) -> ProviderEntry | None:
    return _BY_NAME.get(name)


def provider_choices() -> list[tuple[str, str]]:
    """``(name, label)`` pairs, for a model field's ``choices``."""
    return [(entry.name, entry.label) for entry in PROVIDERS]


def provider_names() -> str:
    """The names for a message: ``"direct, openai or anthropic"``."""
    names = [entry.name for entry in PROVIDERS]
    return ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]
