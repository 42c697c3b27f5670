"""Security issue 23, finding F8: a binding can allow only the domains its admin lists
(``csp_domain_mode`` "listed"); by default ("declared") an empty list still lets views reach
every public domain the server declares (the official MCP Apps examples load from CDNs they
declare). The binding's admin page shows what the server declared, read-only, beside the
list, and the mode changes through ``binding_update`` (audited)."""

from __future__ import annotations

import pytest
from django.test import Client

from audit.models import AuditEvent
from audit.types import AuditEventType
from chat.app_view_bridge import effective_csp
from mcp_bridge.csp import binding_allowed, build_csp
from tests import factories

DECLARED = {
    "resourceDomains": ["https://cdn.jsdelivr.net", "https://unpkg.com"],
    "connectDomains": ["https://api.example.com"],
}


# ---- pure: the builder -----------------------------------------------------------------------


def test_listed_mode_with_no_list_reaches_no_declared_domain():
    result = build_csp(DECLARED, allowed=binding_allowed(None, listed_only=True), suffixes=None)
    assert result.effective["resourceDomains"] == [] and result.effective["connectDomains"] == []
    assert result.directives["connect-src"] == ["'none'"]
    assert not any("jsdelivr" in s or "unpkg" in s for s in result.directives["script-src"])
    assert {d["code"] for d in result.dropped} == {"not_allowed"}


def test_listed_mode_reaches_only_the_listed_domains():
    allowed = binding_allowed(["https://cdn.jsdelivr.net"], listed_only=True)
    result = build_csp(DECLARED, allowed=allowed, suffixes=None)
    assert result.effective["resourceDomains"] == ["https://cdn.jsdelivr.net"]
    assert result.effective["connectDomains"] == []
    assert "https://unpkg.com" not in result.header()


def test_declared_mode_keeps_todays_default():
    result = build_csp(DECLARED, allowed=binding_allowed(None, listed_only=False), suffixes=None)
    assert result.effective == {
        "connectDomains": ["https://api.example.com"],
        "resourceDomains": ["https://cdn.jsdelivr.net", "https://unpkg.com"],
        "frameDomains": [],
        "baseUriDomains": [],
    }


# ---- a binding's views ----------------------------------------------------------------------


@pytest.fixture
def bound_view(personas):
    server = factories.McpServerFactory(name="Charts", slug="charts")
    binding = factories.AppBindingFactory(server=server, workspace=personas.workspace)
    resource = factories.UiResourceFactory(
        server=server, uri="ui://charts/app", meta={"csp": DECLARED}
    )
    return binding, resource


@pytest.mark.django_db
def test_a_listed_binding_gives_its_views_only_the_listed_domains(bound_view):
    binding, resource = bound_view
    assert "https://unpkg.com" in effective_csp(resource, binding).header()  # today's default

    binding.csp_domain_mode = "listed"
    binding.save()
    header = effective_csp(resource, binding).header()
    assert "jsdelivr" not in header and "unpkg" not in header and "api.example" not in header

    binding.allowed_domains = ["https://unpkg.com"]
    binding.save()
    csp = effective_csp(resource, binding)
    assert csp.effective["resourceDomains"] == ["https://unpkg.com"]
    assert csp.effective["connectDomains"] == []


@pytest.mark.django_db
def test_the_admin_shows_the_declared_domains_and_switches_the_mode_audited(personas, bound_view):
    binding, _ = bound_view
    personas.owner.is_staff = personas.owner.is_superuser = True
    personas.owner.save()
    client = Client()
    client.force_login(personas.owner)
    url = f"/admin/bindings/appbinding/{binding.pk}/change/"

    page = client.get(url).content.decode()
    assert "Declared by the server" in page
    for domain in ("https://cdn.jsdelivr.net", "https://unpkg.com", "https://api.example.com"):
        assert f"<code>{domain}</code>" in page
    assert page.count("<td>yes</td>") == 3
    assert 'value="listed"' in page and "official MCP Apps examples" in page

    form = {
        "enabled": "on", "allowed_link_schemes": "https, mailto", "deep_link_protocol": "",
        "ui_message_rate_limit": "6", "allowed_domains": "", "csp_domain_mode": "listed",
        "policies-TOTAL_FORMS": "0", "policies-INITIAL_FORMS": "0",
        "policies-MIN_NUM_FORMS": "0", "policies-MAX_NUM_FORMS": "1000",
    }  # fmt: skip
    response = client.post(url, form)
    assert response.status_code == 302, response.content.decode()[:3000]
    binding.refresh_from_db()
    assert binding.csp_domain_mode == "listed"
    change = AuditEvent.objects.filter(event_type=int(AuditEventType.BINDING_CHANGED)).get()
    assert change.extra["changes"] == {"csp_domain_mode": ["declared", "listed"]}
    assert change.actor_user_id == personas.owner.pk

    page = client.get(url).content.decode()
    assert "<td>yes</td>" not in page
    assert page.count("no — not allowed by the app binding") == 3
