"""Unit tests for mcp_bridge.csp (sandbox CSP and permission policy, DESIGN §7)."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_bridge.csp import (
    build_csp,
    csp_from_openai,
    parse_permissions,
    permissions_allow_attribute,
    validate_domain,
)

# The spec's default policy, plus (inside the sandbox only) eval, blob: workers and
# blob:/data: scripts, images and media: none of these opens a network path.
DEFAULT_HEADER = (
    "default-src 'none'; script-src 'self' 'unsafe-inline' 'unsafe-eval' blob: data:; "
    "worker-src 'self' blob:; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; font-src 'self'; media-src 'self' data: blob:; "
    "connect-src 'none'; frame-src 'none'; object-src 'none'; base-uri 'self'"
)
SCRIPT_EXTRAS = ["'unsafe-eval'", "blob:", "data:"]


def parse_header(header: str) -> dict[str, list[str]]:
    directives: dict[str, list[str]] = {}
    for chunk in header.split(";"):
        name, *values = chunk.split()
        assert name not in directives, f"duplicate directive {name}"
        directives[name] = values
    return directives


# --------------------------------------------------------------------------- validate_domain


@pytest.mark.parametrize(
    ("value", "normalized"),
    [
        ("https://example.com", "https://example.com"),
        ("HTTPS://Example.COM/", "https://example.com"),
        ("https://example.com:443", "https://example.com"),
        ("http://example.com:80", "http://example.com"),
        ("https://example.com:8443", "https://example.com:8443"),
        ("wss://live.example.com", "wss://live.example.com"),
        ("ws://localhost:9000", "ws://localhost:9000"),
        ("http://localhost:3000", "http://localhost:3000"),
        ("https://*.example.com", "https://*.example.com"),
        ("https://*.cdn.example.co.uk:8443/", "https://*.cdn.example.co.uk:8443"),
        ("http://127.0.0.1:7777", "http://127.0.0.1:7777"),
        ("http://[::1]:8080", "http://[::1]:8080"),
        ("https://[2001:DB8:0:0::1]", "https://[2001:db8::1]"),
        ("https://xn--bcher-kva.example", "https://xn--bcher-kva.example"),
        ("https://shop.xn--p1ai", "https://shop.xn--p1ai"),
        ("https://a-b.c-d.example", "https://a-b.c-d.example"),
    ],
)
def test_valid_domains_are_normalized(value: str, normalized: str) -> None:
    assert validate_domain(value) == (normalized, None)
    # Normalization is idempotent.
    assert validate_domain(normalized) == (normalized, None)


@pytest.mark.parametrize(
    ("value", "reason_part"),
    [
        ("'self'", "quotes"),
        ("'unsafe-inline'", "quotes"),
        ("'none'", "quotes"),
        ("'nonce-abc123'", "quotes"),
        ("'sha256-AAAA'", "quotes"),
        ("self", "keywords"),
        ("unsafe-eval", "keywords"),
        ("strict-dynamic", "keywords"),
        ("nonce-abc", "keywords"),
        ("sha256-abc", "keywords"),
        ("*", "bare wildcard"),
        ("https://*", "leftmost"),
        ("https://*.", "missing host"),
        ("https://a.*.example.com", "leftmost"),
        ("https://*example.com", "leftmost"),
        ("https://**.example.com", "leftmost"),
        ("https://*.com", "too broad"),
        ("https://example.com; script-src *", "whitespace"),
        ("https://example.com;script-src", "separator"),
        ("https://a.example,https://b.example", "separator"),
        ("https://ex ample.com", "whitespace"),
        ("https://example.com\t", "control"),
        ("https://example.com\n", "control"),
        ("https://example.com\x00", "control"),
        ("https://example.com\u200b", "whitespace"),
        ("https://example.com\u2028", "whitespace"),
        ('https://example.com"', "quotes"),
        ("https://example.com`", "quotes"),
        ("https:\\\\example.com", "backslash"),
        ("data:", "scheme 'data:'"),
        ("data:text/html;base64", "separator"),
        ("data:text/html", "scheme 'data:'"),
        ("blob:", "scheme 'blob:'"),
        ("blob:https://example.com/uuid", "scheme 'blob:'"),
        ("javascript:alert(1)", "scheme 'javascript:'"),
        ("filesystem:https://example.com/temporary/", "scheme 'filesystem:'"),
        ("ftp://example.com", "scheme 'ftp:'"),
        ("https:", "missing '//'"),
        ("https:example.com", "missing '//'"),
        ("example.com", "missing scheme"),
        ("//example.com", "missing scheme"),
        ("*.example.com", "missing scheme"),
        ("https://user@example.com", "credentials"),
        ("https://user:pw@example.com", "credentials"),
        ("https://example.com/path", "paths"),
        ("https://example.com/path/", "paths"),
        ("https://example.com//", "paths"),
        ("https://example.com?x=1", "query"),
        ("https://example.com#frag", "query"),
        ("https://bücher.de", "non-ASCII"),
        ("https://exаmple.com", "non-ASCII"),  # Cyrillic а
        ("https://example.com:", "invalid port"),
        ("https://example.com:0", "invalid port"),
        ("https://example.com:99999", "invalid port"),
        ("https://example.com:+80", "invalid port"),
        ("https://example.com:*", "port wildcards"),
        ("https://example.com:80:80", "malformed"),
        ("https://a..example.com", "empty label"),
        ("https://example.com.", "empty label"),
        ("https://.example.com", "empty label"),
        ("https://-bad.example.com", "invalid character"),
        ("https://bad-.example.com", "invalid character"),
        ("https://under_score.example.com", "invalid character"),
        ("https://" + "a" * 64 + ".example.com", "invalid character"),
        ("https://" + ".".join(["abcdefghij"] * 25) + ".com", "too long"),
        ("https://" + "a" * 400, "too long"),
        ("https://xn--zzzzzzzzzzz.example", "punycode"),
        ("https://xn--a.example", "punycode"),  # decodes to a control character
        ("https://0x7f.1", "numeric"),
        ("https://127.1", "numeric"),
        ("https://2130706433", "numeric"),
        ("https://0x7f000001", "numeric"),
        ("https://127.000.0.1", "numeric"),
        ("https://256.1.1.1", "numeric"),
        ("https://example.123", "numeric"),
        ("https://*.127.0.0.1", "IP address"),
        ("https://[::1", "IPv6"),
        ("https://[zz::1]", "IPv6"),
        ("https://[fe80::1%25eth0]", "zone"),
        ("https://[::1]x", "malformed"),
        ("", "empty"),
    ],
)
def test_hostile_or_malformed_domains_are_rejected(value: str, reason_part: str) -> None:
    normalized, reason = validate_domain(value)
    assert normalized is None
    assert reason is not None and reason_part in reason, reason


@pytest.mark.parametrize("value", [None, 5, ["https://a.example"], {"x": 1}, b"https://a.example"])
def test_non_string_domains_are_rejected(value: Any) -> None:
    assert validate_domain(value) == (None, "not a string")


# --------------------------------------------------------------------------- build_csp


def test_default_policy_when_nothing_is_declared() -> None:
    for declared in (None, {}, {"connectDomains": []}):
        result = build_csp(declared)
        assert result.header() == DEFAULT_HEADER
        assert result.dropped == []
        assert result.needs_external_domains is False
        assert result.effective == {
            "connectDomains": [],
            "resourceDomains": [],
            "frameDomains": [],
            "baseUriDomains": [],
        }


def test_declared_domains_widen_the_right_directives() -> None:
    result = build_csp(
        {
            "connectDomains": ["https://api.example.com", "wss://live.example.com"],
            "resourceDomains": ["https://cdn.example.com"],
            "frameDomains": ["https://www.youtube.com"],
            "baseUriDomains": ["https://base.example.com"],
        }
    )
    assert result.directives == {
        "default-src": ["'none'"],
        "script-src": ["'self'", "'unsafe-inline'", *SCRIPT_EXTRAS, "https://cdn.example.com"],
        "worker-src": ["'self'", "blob:"],
        "style-src": ["'self'", "'unsafe-inline'", "https://cdn.example.com"],
        "img-src": ["'self'", "data:", "blob:", "https://cdn.example.com"],
        "font-src": ["'self'", "https://cdn.example.com"],
        "media-src": ["'self'", "data:", "blob:", "https://cdn.example.com"],
        "connect-src": ["https://api.example.com", "wss://live.example.com"],
        "frame-src": ["https://www.youtube.com"],
        "object-src": ["'none'"],
        "base-uri": ["https://base.example.com"],
    }
    assert parse_header(result.header()) == result.directives
    assert result.needs_external_domains is True


def test_injection_attempts_never_reach_the_header() -> None:
    hostile = [
        "https://ok.example.com; script-src *",
        "https://ok.example.com;script-src 'unsafe-eval'",
        "'unsafe-eval'",
        "'strict-dynamic'",
        "*",
        "data:",
        "blob:",
        "https://a.example, https://b.example",
        "https://x.example\r\nX-Injected: 1",
        "'nonce-abc'",
        "javascript:alert(1)",
    ]
    result = build_csp(
        {
            category: hostile
            for category in ("connectDomains", "resourceDomains", "frameDomains", "baseUriDomains")
        }
    )
    header = result.header()
    assert header == DEFAULT_HEADER
    assert len(result.dropped) == 4 * len(hostile)
    assert all(item["code"] == "invalid" for item in result.dropped)
    assert all(item["reason"].startswith("invalid: ") for item in result.dropped)
    # Dropped values are escaped for audit logs (no raw newlines).
    assert all("\n" not in item["value"] and "\r" not in item["value"] for item in result.dropped)


def test_allowed_domains_intersect_with_declared() -> None:
    result = build_csp(
        {"connectDomains": ["https://api.example.com", "https://tracker.example.net"]},
        allowed={"connectDomains": ["https://api.example.com"]},
    )
    assert result.effective["connectDomains"] == ["https://api.example.com"]
    assert result.dropped == [
        {
            "category": "connectDomains",
            "value": "https://tracker.example.net",
            "reason": "not allowed by the app binding",
            "code": "not_allowed",
        }
    ]


def test_allowed_domains_never_add_undeclared_domains() -> None:
    result = build_csp({}, allowed=["https://api.example.com"])
    assert result.header() == DEFAULT_HEADER


def test_invalid_and_not_allowed_have_distinct_reasons() -> None:
    result = build_csp(
        {"resourceDomains": ["'unsafe-eval'", "https://cdn.other.example"]},
        allowed=["https://cdn.example.com"],
    )
    assert [(d["code"], d["reason"]) for d in result.dropped] == [
        ("invalid", "invalid: contains quotes (CSP keywords are not allowed)"),
        ("not_allowed", "not allowed by the app binding"),
    ]


@pytest.mark.parametrize(
    ("allowed", "declared", "kept"),
    [
        ("https://*.example.com", "https://api.example.com", True),
        ("https://*.example.com", "https://a.b.example.com", True),
        ("https://*.example.com", "https://example.com", False),  # like CSP: apex not covered
        ("https://*.example.com", "https://*.example.com", True),
        ("https://*.example.com", "https://*.api.example.com", True),
        ("https://*.api.example.com", "https://*.example.com", False),  # wider than allowed
        ("https://api.example.com", "https://*.example.com", False),
        ("https://api.example.com", "https://*.api.example.com", False),
        ("https://api.example.com", "https://api.example.com", True),
        ("https://api.example.com/", "HTTPS://API.EXAMPLE.COM:443", True),
        ("https://api.example.com", "http://api.example.com", False),
        ("http://api.example.com", "https://api.example.com", False),
        ("https://api.example.com", "wss://api.example.com", False),
        ("https://api.example.com:8443", "https://api.example.com", False),
        ("https://api.example.com", "https://api.example.com:8443", False),
        ("https://*.example.com", "https://evil-example.com", False),
        ("https://*.example.com", "https://example.com.evil.net", False),
        ("https://*.ample.com", "https://example.com", False),
    ],
)
def test_wildcard_and_exact_matching(allowed: str, declared: str, kept: bool) -> None:
    result = build_csp({"connectDomains": [declared]}, allowed={"connectDomains": [allowed]})
    assert bool(result.effective["connectDomains"]) is kept


def test_flat_allowed_list_applies_to_every_category() -> None:
    declared = {
        category: ["https://x.example.com"]
        for category in ("connectDomains", "resourceDomains", "frameDomains", "baseUriDomains")
    }
    result = build_csp(declared, allowed=["https://*.example.com"])
    assert all(values == ["https://x.example.com"] for values in result.effective.values())


def test_allowed_dict_missing_a_category_allows_nothing_there() -> None:
    result = build_csp(
        {"connectDomains": ["https://a.example.com"], "resourceDomains": ["https://a.example.com"]},
        allowed={"connectDomains": ["https://a.example.com"]},
    )
    assert result.effective["connectDomains"] == ["https://a.example.com"]
    assert result.effective["resourceDomains"] == []
    assert result.directives["script-src"] == ["'self'", "'unsafe-inline'", *SCRIPT_EXTRAS]


@pytest.mark.parametrize("allowed", ["https://a.example.com", 5, object()])
def test_allowed_of_unknown_shape_fails_closed(allowed: Any) -> None:
    result = build_csp({"connectDomains": ["https://a.example.com"]}, allowed=allowed)
    assert result.effective["connectDomains"] == []


def test_invalid_admin_entries_are_ignored() -> None:
    result = build_csp(
        {"connectDomains": ["https://a.example.com"]},
        allowed=["*", "'self'", "https://a.example.com"],
    )
    assert result.effective["connectDomains"] == ["https://a.example.com"]
    result = build_csp({"connectDomains": ["https://a.example.com"]}, allowed=["*"])
    assert result.effective["connectDomains"] == []


def test_declared_of_wrong_shape_is_reported() -> None:
    result = build_csp(["https://a.example.com"])
    assert result.header() == DEFAULT_HEADER
    assert result.dropped[0]["category"] == "*"
    assert result.dropped[0]["code"] == "invalid"
    category_not_list = build_csp({"connectDomains": "https://a.example.com"})
    assert category_not_list.dropped == [
        {
            "category": "connectDomains",
            "value": "https://a.example.com",
            "reason": "invalid: expected a list of domains",
            "code": "invalid",
        }
    ]


def test_duplicates_are_collapsed_and_too_many_are_dropped() -> None:
    result = build_csp(
        {
            "connectDomains": [
                "https://a.example.com",
                "HTTPS://A.EXAMPLE.COM/",
                "https://a.example.com:443",
            ]
        }
    )
    assert result.effective["connectDomains"] == ["https://a.example.com"]
    many = [f"https://h{i}.example.com" for i in range(70)]
    result = build_csp({"resourceDomains": many})
    assert len(result.effective["resourceDomains"]) == 64
    assert [d["code"] for d in result.dropped] == ["too_many"] * 6


def test_unknown_categories_are_ignored() -> None:
    result = build_csp(
        {"scriptDomains": ["https://evil.example"], "redirectDomains": ["https://x.example"]}
    )
    assert result.header() == DEFAULT_HEADER


def test_to_dict_is_plain_data() -> None:
    data = build_csp({"connectDomains": ["https://a.example.com", "*"]}).to_dict()
    assert data["header"].startswith("default-src 'none'")
    assert data["effective"]["connectDomains"] == ["https://a.example.com"]
    assert data["dropped"][0]["value"] == "*"


# --------------------------------------------------------------------------- Apps SDK


def test_csp_from_openai_maps_snake_case_keys() -> None:
    widget_csp = {
        "connect_domains": ["https://api.example.com"],
        "resource_domains": ["https://cdn.example.com"],
        "frame_domains": ["https://frames.example.com"],
        "redirect_domains": ["https://checkout.example.com"],
    }
    converted = csp_from_openai(widget_csp)
    assert converted == {
        "connectDomains": ["https://api.example.com"],
        "resourceDomains": ["https://cdn.example.com"],
        "frameDomains": ["https://frames.example.com"],
        "redirectDomains": ["https://checkout.example.com"],
    }
    # Also accepts the whole _meta; redirect domains never widen the CSP.
    assert csp_from_openai({"openai/widgetCSP": widget_csp}) == converted
    header = build_csp(converted).header()
    assert "checkout.example.com" not in header
    assert "base-uri 'self'" in header
    assert csp_from_openai("junk") == {}
    assert csp_from_openai({"openai/widgetCSP": ["x"]}) == {}


# --------------------------------------------------------------------------- permissions


def test_permissions_only_declared_and_granted() -> None:
    declared = {"camera": {}, "microphone": {}, "clipboardWrite": {}}
    assert permissions_allow_attribute(declared, {"camera", "clipboardWrite", "geolocation"}) == (
        "camera; clipboard-write",
        ["camera", "clipboardWrite"],
    )
    assert permissions_allow_attribute(declared, set()) == ("", [])
    assert permissions_allow_attribute(None, {"camera"}) == ("", [])


def test_permission_order_is_stable_and_list_form_is_accepted() -> None:
    all_names = {"camera", "microphone", "geolocation", "clipboardWrite"}
    assert permissions_allow_attribute(
        ["clipboardWrite", "geolocation", "microphone", "camera"], all_names
    ) == (
        "camera; microphone; geolocation; clipboard-write",
        ["camera", "microphone", "geolocation", "clipboardWrite"],
    )


def test_hostile_permission_declarations() -> None:
    problems: list[str] = []
    declared = {
        "camera": "yes",
        "microphone": False,
        "usb": {},
        "clipboard-write": {},
        "geolocation": True,
    }
    assert parse_permissions(declared, problems) == ("geolocation",)
    assert len(problems) == 3
    assert permissions_allow_attribute(
        {"camera; display-capture": {}}, {"camera; display-capture"}
    ) == ("", [])
    assert permissions_allow_attribute("camera", {"camera"}) == ("", [])
    assert permissions_allow_attribute({"camera": {}}, 5) == ("", [])  # type: ignore[arg-type]


# --------------------------------------------------------------------------- network limits


@pytest.mark.parametrize(
    "declared, code",
    [
        ("http://localhost:8000", "private_address"),
        ("http://localhost:5173", "private_address"),
        ("http://board.localhost:8000", "private_address"),
        ("http://*.dev.localhost", "private_address"),
        ("http://127.0.0.1:8000", "private_address"),
        ("http://127.0.0.1", "private_address"),
        ("https://10.0.0.5", "private_address"),
        ("https://172.16.3.4:8443", "private_address"),
        ("https://192.168.1.1", "private_address"),
        ("http://169.254.169.254", "private_address"),  # cloud metadata
        ("http://0.0.0.0:8000", "private_address"),
        ("http://[::1]:8000", "private_address"),
        ("http://[fd00::1]", "private_address"),  # unique-local
        ("http://[fe80::1]", "private_address"),  # link-local
        ("http://[::ffff:127.0.0.1]", "private_address"),  # IPv4-mapped loopback
        ("https://intranet", "private_address"),  # a single label resolves locally
        ("https://chat.example.com", "reserved"),  # the app
        ("wss://chat.example.com", "reserved"),
        ("https://*.example.com", "reserved"),  # covers the app
        ("https://github.sandbox.example.net", "reserved"),  # a server's sandbox
        ("https://*.sandbox.example.net", "reserved"),
        ("https://*.example.net", "reserved"),  # covers every sandbox
        ("https://*.co.uk", "public_suffix"),
        ("https://*.github.io", "public_suffix"),
    ],
)
def test_network_sources_never_reach_private_reserved_or_suffix_targets(declared, code):
    reserved = ("chat.example.com", "sandbox.example.net")
    for allowed in (None, ["https://api.example.org", "https://*.example.org"]):
        result = build_csp(
            {
                "connectDomains": [declared],
                "resourceDomains": [declared],
                "frameDomains": [declared],
            },
            allowed=allowed,
            reserved_hosts=reserved,
        )
        for directive in ("connect-src", "script-src", "frame-src", "img-src"):
            assert declared.lower() not in result.directives[directive], (directive, allowed)
        assert {d["code"] for d in result.dropped} == {code}, result.dropped
        assert len(result.dropped) == 3  # reported per category, for the admin and the audit


def test_the_admin_may_name_a_restricted_origin_exactly():
    declared = {"connectDomains": ["http://localhost:5173", "https://*.co.uk"]}
    exact = build_csp(declared, allowed=["http://localhost:5173", "https://*.co.uk"])
    assert exact.directives["connect-src"] == ["http://localhost:5173", "https://*.co.uk"]
    assert exact.dropped == []
    # A wider admin entry is not "exactly": a wildcard never lets a restricted source in.
    wide = build_csp(
        {"connectDomains": ["https://chat.example.com"]},
        allowed=["https://*.example.com"],
        reserved_hosts=["chat.example.com"],
    )
    assert wide.directives["connect-src"] == ["'none'"]


def test_public_wildcards_and_hosts_are_kept():
    result = build_csp(
        {"connectDomains": ["https://*.example.org", "https://api.example.com", "https://8.8.8.8"]},
        reserved_hosts=("chat.example.com", "sandbox.example.net"),
    )
    assert result.directives["connect-src"] == [
        "https://*.example.org",
        "https://api.example.com",
        "https://8.8.8.8",
    ]
    assert result.dropped == []


def test_without_a_public_suffix_list_every_wildcard_is_refused():
    result = build_csp(
        {"connectDomains": ["https://*.example.org", "https://a.example.org"]}, suffixes=None
    )
    assert result.directives["connect-src"] == ["https://a.example.org"]
    assert [d["code"] for d in result.dropped] == ["public_suffix"]
