"""One table of model providers (chat.providers.registry): what derives from it agrees."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.core.checks import run_checks

from chat.models import Workspace
from chat.providers import provider_for
from chat.providers.base import ProviderConfig, ProviderError
from chat.providers.registry import PROVIDERS, provider_choices, provider_names

REPO = Path(__file__).resolve().parents[2]
NAMES = [entry.name for entry in PROVIDERS]


def test_the_workspace_field_offers_exactly_the_registry():
    assert Workspace._meta.get_field("provider").choices == provider_choices()
    assert [name for name, _label in provider_choices()] == NAMES


def test_every_name_builds_its_provider_and_others_are_refused_by_name():
    for entry in PROVIDERS:
        assert provider_for(ProviderConfig(entry.name)) is not None
    with pytest.raises(ProviderError) as refused:
        provider_for(ProviderConfig("gemini"))
    assert refused.value.code == "unknown_provider"
    assert f"(use {provider_names()})" in refused.value.message


def test_the_readme_lists_the_registry():
    readme = (REPO / "README.md").read_text()
    listed = re.search(r"`ATRIUM_PROVIDER`\s*\(([^)]*)\)", readme)
    assert listed is not None
    assert re.findall(r"`([a-z]+)`", listed.group(1)) == NAMES


def test_an_unknown_atrium_provider_fails_the_checks(settings):
    settings.ATRIUM_PROVIDER = "gemini"
    assert "chat.E001" in [message.id for message in run_checks()]
    settings.ATRIUM_PROVIDER = "Anthropic"
    assert "chat.E001" not in [message.id for message in run_checks()]
