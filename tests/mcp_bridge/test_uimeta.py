"""Unit tests for mcp_bridge.uimeta (tool/resource UI metadata, MIME helpers)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcp_bridge.uimeta import (
    APP_MIME,
    first_http_url,
    is_ui_uri,
    json_safe,
    normalize_mime,
    parse_frame_size,
    parse_mime,
    parse_resource_ui,
    parse_tool_ui,
    ui_flavor,
)

# --------------------------------------------------------------------------- MIME


@pytest.mark.parametrize(
    "value",
    [
        "text/html;profile=mcp-app",
        "text/html; profile=mcp-app",
        "TEXT/HTML;PROFILE=MCP-APP",
        'text/html ; profile="mcp-app"',
        "text/html;profile=mcp-app;",
    ],
)
def test_app_mime_variants_normalize_to_one_string(value: str) -> None:
    assert normalize_mime(value) == APP_MIME


def test_parameters_are_sorted_and_case_preserved_where_it_matters() -> None:
    assert normalize_mime("text/html; profile=mcp-app; charset=UTF-8") == (
        "text/html;charset=utf-8;profile=mcp-app"
    )
    assert (
        normalize_mime('multipart/mixed; boundary="AbC dEf"')
        == 'multipart/mixed;boundary="AbC dEf"'
    )
    assert normalize_mime("text/plain; junk; =x; a=b c") == "text/plain"
    # First occurrence of a repeated parameter wins.
    assert normalize_mime("text/html;profile=mcp-app;profile=other") == APP_MIME
    # Quoted semicolons do not split.
    assert parse_mime('text/plain; note="a;b"').param("note") == "a;b"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "value",
    [
        None,
        5,
        "",
        "html",
        "text/",
        "/html",
        "text/html/x",
        "te xt/html",
        "text/ht<ml",
        "x" * 300 + "/y",
    ],
)
def test_invalid_mime_types(value: Any) -> None:
    assert parse_mime(value) is None
    assert normalize_mime(value) == "application/octet-stream"
    assert normalize_mime(value, default="") == ""


@pytest.mark.parametrize(
    ("mime", "text", "flavor"),
    [
        ("text/html", "<p>", "html"),
        ("text/html; charset=utf-8", "<p>", "html"),
        ("text/html;profile=other", "<p>", "html"),
        ("text/html;profile=mcp-app", "<!doctype html>", "mcp-app"),
        ("text/html; profile=mcp-app", "https://x.example/app", "url"),
        ("text/html;profile=mcp-app", " https://x.example/app \n", "url"),
        ("text/html;profile=mcp-app", "https://x.example/a\nhttps://y.example/b", "mcp-app"),
        ("text/html;profile=mcp-app", "javascript:alert(1)", "mcp-app"),
        ("text/html;profile=mcp-app", None, "mcp-app"),
        ("text/html+skybridge", "<div>", "skybridge"),
        ("text/uri-list", "https://x.example", "url"),
        ("application/vnd.mcp-ui.remote-dom+javascript; framework=react", "x", "remote-dom"),
        ("application/vnd.mcp-ui.remote-dom", "x", "remote-dom"),
        ("text/plain", "x", None),
        ("image/png", None, None),
        ("application/javascript", "x", None),
        (None, "<p>", None),
        ("garbage", "<p>", None),
    ],
)
def test_ui_flavor(mime: Any, text: Any, flavor: str | None) -> None:
    assert ui_flavor(mime, text) == flavor


def test_first_http_url_follows_rfc_2483() -> None:
    body = "# a comment\n\n  \nmailto:x@y.example\nhttp://first.example/path?q=1\nhttps://second.example\n"
    assert first_http_url(body) == "http://first.example/path?q=1"
    assert (
        first_http_url("#https://commented.example\nhttps://real.example") == "https://real.example"
    )
    assert first_http_url("https://ok.example\r\nhttps://other.example") == "https://ok.example"
    for junk in (
        None,
        5,
        "",
        "# only",
        "https://",
        "https://a b.example",
        "https://u:p@x.example",
        "http://x.example:99999",
    ):
        assert first_http_url(junk) is None


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("ui://board/app", True),
        ("UI://board/app", True),
        ("ui://", False),
        ("ui:/board", False),
        ("https://board", False),
        ("ui://bo ard", False),
        ("ui://board\n", False),
        ("ui://" + "x" * 3000, False),
        (None, False),
        (5, False),
    ],
)
def test_is_ui_uri(value: Any, ok: bool) -> None:
    assert is_ui_uri(value) is ok


# --------------------------------------------------------------------------- parse_tool_ui


def test_nested_resource_uri_wins_over_flat_and_apps_sdk_keys() -> None:
    tool = {
        "name": "board",
        "_meta": {
            "ui": {"resourceUri": "ui://board/v2"},
            "ui/resourceUri": "ui://board/v1",
            "openai/outputTemplate": "ui://board/sdk",
        },
    }
    parsed = parse_tool_ui(tool)
    assert parsed.resource_uri == "ui://board/v2"
    assert parsed.is_app_sdk is True
    assert len(parsed.problems) == 2  # both disagreeing fallbacks are noted


def test_flat_key_and_output_template_fallbacks() -> None:
    assert parse_tool_ui({"_meta": {"ui/resourceUri": "ui://flat/x"}}).resource_uri == "ui://flat/x"
    sdk = parse_tool_ui({"_meta": {"openai/outputTemplate": "ui://widget/x.html"}})
    assert sdk.resource_uri == "ui://widget/x.html"
    assert sdk.is_app_sdk is True
    assert parse_tool_ui({"_meta": {}}).resource_uri is None
    assert parse_tool_ui({"name": "t"}).resource_uri is None


def test_same_uri_in_nested_and_flat_keys_is_not_a_problem() -> None:
    parsed = parse_tool_ui(
        {"_meta": {"ui": {"resourceUri": "ui://a/b"}, "ui/resourceUri": "ui://a/b"}}
    )
    assert parsed.resource_uri == "ui://a/b"
    assert parsed.problems == []
    assert parsed.is_app_sdk is False


@pytest.mark.parametrize(
    "bad_uri",
    [
        "https://evil.example/app.html",
        "javascript:alert(1)",
        "file:///etc/passwd",
        5,
        ["ui://x"],
        "ui://",
    ],
)
def test_non_ui_resource_uris_are_rejected(bad_uri: Any) -> None:
    parsed = parse_tool_ui({"_meta": {"ui": {"resourceUri": bad_uri}}})
    assert parsed.resource_uri is None
    assert any("not a ui:// URI" in problem for problem in parsed.problems)


def test_invalid_nested_uri_falls_back_to_a_valid_flat_one() -> None:
    parsed = parse_tool_ui(
        {"_meta": {"ui": {"resourceUri": "https://x"}, "ui/resourceUri": "ui://ok/1"}}
    )
    assert parsed.resource_uri == "ui://ok/1"
    assert len(parsed.problems) == 1


@pytest.mark.parametrize(
    ("visibility", "expected"),
    [
        (["model", "app"], ("model", "app")),
        (["app", "model"], ("model", "app")),
        (["app"], ("app",)),
        (["model"], ("model",)),
        ([], ()),
        (["app", "app"], ("app",)),
    ],
)
def test_visibility(visibility: list[str], expected: tuple[str, ...]) -> None:
    parsed = parse_tool_ui({"_meta": {"ui": {"visibility": visibility}}})
    assert parsed.visibility == expected
    assert parsed.problems == []


def test_visibility_defaults_and_hostile_values() -> None:
    assert parse_tool_ui({}).visibility == ("model", "app")
    unknown = parse_tool_ui({"_meta": {"ui": {"visibility": ["app", "admin", 5, None]}}})
    assert unknown.visibility == ("app",)
    assert len(unknown.problems) == 3
    not_a_list = parse_tool_ui({"_meta": {"ui": {"visibility": "app"}}})
    assert not_a_list.visibility == ("model", "app")
    assert "not a list" in not_a_list.problems[0]


@pytest.mark.parametrize(
    ("meta", "expected"),
    [
        ({"openai/visibility": "private", "openai/widgetAccessible": True}, ("app",)),
        ({"openai/visibility": "private"}, ()),
        ({"openai/widgetAccessible": True}, ("model", "app")),
        ({"openai/widgetAccessible": False}, ("model",)),
        ({"openai/visibility": "public"}, ("model",)),
        ({"openai/widgetAccessible": "true"}, ("model",)),
        ({"openai/outputTemplate": "ui://w/x"}, ("model", "app")),
    ],
)
def test_apps_sdk_visibility_semantics(meta: dict[str, Any], expected: tuple[str, ...]) -> None:
    assert parse_tool_ui({"_meta": meta}).visibility == expected


def test_ui_visibility_wins_over_apps_sdk_keys() -> None:
    tool = {"_meta": {"ui": {"visibility": ["model"]}, "openai/widgetAccessible": True}}
    assert parse_tool_ui(tool).visibility == ("model",)


def test_annotations_keep_only_booleans_and_a_title() -> None:
    parsed = parse_tool_ui(
        {
            "annotations": {
                "readOnlyHint": True,
                "destructiveHint": "false",
                "idempotentHint": 1,
                "openWorldHint": False,
                "title": "  Search  ",
                "evil": True,
            }
        }
    )
    assert parsed.annotations == {"readOnlyHint": True, "openWorldHint": False, "title": "Search"}
    assert len(parsed.problems) == 2
    assert parse_tool_ui({"annotations": "x"}).annotations == {}


@pytest.mark.parametrize("tool", [None, "tool", 5, ["x"]])
def test_non_dict_tool(tool: Any) -> None:
    parsed = parse_tool_ui(tool)
    assert parsed.resource_uri is None
    assert parsed.visibility == ("model", "app")
    assert parsed.problems


@pytest.mark.parametrize("meta", ["x", 5, ["ui"]])
def test_non_dict_meta(meta: Any) -> None:
    parsed = parse_tool_ui({"_meta": meta})
    assert parsed.resource_uri is None
    assert parsed.problems


def test_non_dict_ui_key() -> None:
    parsed = parse_tool_ui({"_meta": {"ui": "ui://x/y", "ui/resourceUri": "ui://x/z"}})
    assert parsed.resource_uri == "ui://x/z"
    assert parsed.problems


def test_tool_ui_to_dict() -> None:
    parsed = parse_tool_ui({"_meta": {"ui": {"resourceUri": "ui://a/b", "visibility": ["app"]}}})
    assert parsed.to_dict() == {
        "resourceUri": "ui://a/b",
        "visibility": ["app"],
        "annotations": {},
        "isAppSdk": False,
        "problems": [],
    }
    assert parsed.model_visible is False
    assert parsed.app_callable is True


# --------------------------------------------------------------------------- parse_resource_ui


def test_content_meta_wins_per_key_over_listing_meta() -> None:
    content = {
        "ui": {"csp": {"connectDomains": ["https://content.example"]}, "prefersBorder": False}
    }
    listing = {
        "ui": {
            "csp": {"connectDomains": ["https://listing.example"]},
            "permissions": {"camera": {}},
            "domain": "https://listing-domain.example",
            "prefersBorder": True,
        }
    }
    parsed = parse_resource_ui(content, listing)
    assert parsed.csp == {"connectDomains": ["https://content.example"]}
    assert parsed.prefers_border is False  # a False in content still wins
    assert parsed.permissions == ("camera",)  # listing fallback
    assert parsed.domain == "https://listing-domain.example"
    assert parsed.problems == []


def test_listing_only_and_nothing_at_all() -> None:
    assert parse_resource_ui(None, {"ui": {"prefersBorder": True}}).prefers_border is True
    empty = parse_resource_ui(None, None)
    assert empty.to_dict() == {
        "csp": None,
        "permissions": [],
        "domain": None,
        "prefersBorder": None,
    }


def test_apps_sdk_resource_keys() -> None:
    meta = {
        "openai/widgetCSP": {
            "connect_domains": ["https://api.example"],
            "resource_domains": ["https://cdn.example"],
        },
        "openai/widgetDomain": "https://chatgpt.example",
        "openai/widgetPrefersBorder": True,
    }
    parsed = parse_resource_ui(meta, None)
    assert parsed.csp == {
        "connectDomains": ["https://api.example"],
        "resourceDomains": ["https://cdn.example"],
    }
    assert parsed.domain == "https://chatgpt.example"
    assert parsed.prefers_border is True


def test_ui_keys_win_over_apps_sdk_aliases_at_the_same_level() -> None:
    meta = {
        "ui": {"csp": {"connectDomains": ["https://ui.example"]}, "prefersBorder": False},
        "openai/widgetCSP": {"connect_domains": ["https://sdk.example"]},
        "openai/widgetPrefersBorder": True,
    }
    parsed = parse_resource_ui(meta, None)
    assert parsed.csp == {"connectDomains": ["https://ui.example"]}
    assert parsed.prefers_border is False


def test_hostile_resource_meta_types_are_dropped_with_problems() -> None:
    content = {
        "ui": {
            "csp": "connect-src *",
            "permissions": "camera",
            "domain": "https://x.example; script-src *",
            "prefersBorder": "yes",
        },
        "mcpui.dev/ui-preferred-frame-size": ["100px; background:url(x)", "10px"],
        "mcpui.dev/ui-initial-render-data": ["not", "an", "object"],
    }
    listing = {"ui": {"csp": {"connectDomains": ["https://fallback.example", 5, None]}}}
    parsed = parse_resource_ui(content, listing)
    # Each broken content key falls back to the listing (or to nothing).
    assert parsed.csp == {"connectDomains": ["https://fallback.example"]}
    assert parsed.permissions == ()
    assert parsed.domain is None
    assert parsed.prefers_border is None
    assert parsed.preferred_frame_size is None
    assert parsed.initial_render_data is None
    assert len(parsed.problems) == 7


@pytest.mark.parametrize("meta", ["x", 5, ["ui"]])
def test_non_dict_resource_meta(meta: Any) -> None:
    parsed = parse_resource_ui(meta, meta)
    assert parsed.csp is None
    assert len(parsed.problems) == 2


def test_csp_categories_are_cleaned_not_validated() -> None:
    parsed = parse_resource_ui(
        {
            "ui": {
                "csp": {
                    "connectDomains": ["*", "https://a.example"],
                    "unknownDomains": ["x"],
                    "frameDomains": "x",
                }
            }
        },
        None,
    )
    # Syntax validation is csp.build_csp's job; here only types are enforced.
    assert parsed.csp == {"connectDomains": ["*", "https://a.example"]}
    assert parsed.problems == ["content _meta.ui.csp.frameDomains is a string, not a list"]


def test_too_many_declared_domains_are_capped() -> None:
    parsed = parse_resource_ui(
        {"ui": {"csp": {"connectDomains": [f"https://h{i}.example" for i in range(100)]}}}, None
    )
    assert parsed.csp is not None and len(parsed.csp["connectDomains"]) == 64


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (["800px", "600px"], ["800px", "600px"]),
        ([800, 600], ["800px", "600px"]),
        (["100%", "auto"], ["100%", "auto"]),
        ({"width": 320, "height": 288}, ["320px", "288px"]),
        (["320", "20.5em"], ["320px", "20.5em"]),
        (["800px"], None),
        (["800px", "600px", "1px"], None),
        ("800x600", None),
        ([True, 5], None),
        ([float("inf"), 5], None),
        ([-5, 5], None),
        (["expression(alert(1))", "5px"], None),
        (["calc(100% - 1px)", "5px"], None),
        ([None, "5px"], None),
    ],
)
def test_parse_frame_size(raw: Any, expected: list[str] | None) -> None:
    assert parse_frame_size(raw) == expected


def test_initial_render_data_is_copied_safely() -> None:
    data = {"items": [1, 2], "bad": float("nan"), "blob": b"x"}
    parsed = parse_resource_ui({"mcpui.dev/ui-initial-render-data": data}, None)
    assert parsed.initial_render_data == {"items": [1, 2], "bad": None, "blob": None}
    assert parsed.problems


# --------------------------------------------------------------------------- json_safe


def test_json_safe_handles_hostile_python_values() -> None:
    cyclic: dict[str, Any] = {"a": 1}
    cyclic["self"] = cyclic
    value = {
        "nan": float("nan"),
        "inf": float("-inf"),
        "bytes": b"x",
        "set": {1, 2},
        "tuple": (1, "x"),
        "cycle": cyclic,
        1: "int key",
        (1, 2): "tuple key",
        "text": "a\x00b\udc00",
    }
    copy, problems = json_safe(value)
    assert copy == {
        "nan": None,
        "inf": None,
        "bytes": None,
        "set": None,
        "tuple": [1, "x"],
        "cycle": {"a": 1, "self": None},
        "1": "int key",
        "text": "a\ufffdb\ufffd",
    }
    assert len(problems) == 5
    json.dumps(copy, allow_nan=False).encode("utf-8")


def test_json_safe_bounds_depth_and_work() -> None:
    deep: list[Any] = []
    cursor = deep
    for _ in range(10_000):
        cursor.append([])
        cursor = cursor[0]
    copy, problems = json_safe(deep, max_depth=10)
    depth = 0
    while isinstance(copy, list) and copy:
        copy = copy[0]
        depth += 1
    assert depth == 10
    assert problems == ["data nested deeper than 10 levels: truncated"]

    # A DAG that is exponential when expanded must still be cheap.
    node: Any = []
    for _ in range(60):
        node = [node, node]
    _, problems = json_safe(node, max_nodes=10_000)
    assert "data too large: truncated" in problems
