"""Property tests (hypothesis) for the pure bridge modules and partial-JSON repair."""

from __future__ import annotations

import base64
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chat.partial_json import repair_partial_json
from mcp_bridge.csp import CSP_CATEGORIES, build_csp, permissions_allow_attribute, validate_domain
from mcp_bridge.normalize import (
    StagedPayload,
    build_sanitized_tool_result,
    model_content,
    normalize_tool_result,
    text_fallback,
)
from mcp_bridge.uimeta import parse_resource_ui, parse_tool_ui
from tests.chat.test_partial_json import consistent

FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --------------------------------------------------------------------------- strategies

json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
# Python values that are not JSON at all, as an in-process caller might pass.
weird_values = st.sampled_from(
    [b"bytes", {1, 2}, (1, 2), object(), float("nan"), float("inf"), -(2**70)]
)
anything = json_values | weird_values

base64ish = st.one_of(
    st.binary(max_size=300).map(lambda b: base64.b64encode(b).decode()),
    st.text(alphabet="ABCDEFabcdef0123456789+/=\n -_*", max_size=60),
    anything,
)
mime_types = st.one_of(
    st.sampled_from(
        [
            "image/png",
            "IMAGE/JPEG",
            "audio/wav",
            "video/mp4",
            "application/pdf",
            "text/html",
            "text/html;profile=mcp-app",
            "text/html; profile=mcp-app",
            "text/uri-list",
            "text/html+skybridge",
            "application/vnd.mcp-ui.remote-dom+javascript; framework=react",
            "text/plain",
            "garbage",
            "",
        ]
    ),
    anything,
)
uris = st.one_of(
    st.sampled_from(
        [
            "ui://app/view",
            "UI://x",
            "ui://",
            "https://example.com/a.png",
            "file:///tmp/x.bin",
            "javascript:alert(1)",
            "data:,x",
            "",
        ]
    ),
    st.text(max_size=30),
    anything,
)
meta_values = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "ui": st.one_of(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "csp": st.dictionaries(
                            st.sampled_from(list(CSP_CATEGORIES)),
                            st.lists(st.text(max_size=30), max_size=3) | anything,
                            max_size=4,
                        )
                        | anything,
                        "permissions": st.dictionaries(
                            st.sampled_from(["camera", "microphone", "usb"]), anything, max_size=3
                        )
                        | anything,
                        "domain": anything,
                        "prefersBorder": anything,
                        "resourceUri": uris,
                        "visibility": st.lists(
                            st.sampled_from(["model", "app", "x"]) | anything, max_size=3
                        )
                        | anything,
                    },
                ),
                anything,
            ),
            "mcpui.dev/ui-preferred-frame-size": anything,
            "mcpui.dev/ui-initial-render-data": anything,
            "openai/widgetCSP": anything,
            "openai/outputTemplate": uris,
            "openai/visibility": anything,
            "openai/widgetAccessible": anything,
        },
    ),
    anything,
)
blocks = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=50) | anything}),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["image", "audio"]), "data": base64ish, "mimeType": mime_types}
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("resource"),
            "resource": st.one_of(
                st.fixed_dictionaries(
                    {"uri": uris, "mimeType": mime_types},
                    optional={
                        "text": st.text(max_size=60) | anything,
                        "blob": base64ish,
                        "_meta": meta_values,
                    },
                ),
                anything,
            ),
        }
    ),
    st.fixed_dictionaries(
        {"type": st.just("resource_link"), "uri": uris},
        optional={
            "name": anything,
            "title": anything,
            "mimeType": mime_types,
            "size": anything,
            "description": anything,
        },
    ),
    st.fixed_dictionaries({"type": anything}),
    anything,
)
raw_results = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "content": st.lists(blocks, max_size=6) | anything,
            "structuredContent": json_values | weird_values,
            "isError": anything,
            "_meta": meta_values,
        },
    ),
    anything,
)


def stage(payload: StagedPayload) -> dict[str, Any]:
    assert isinstance(payload.data, bytes) and payload.data
    return {"assetId": "fuzz", "status": "staged", "size": len(payload.data)}


# --------------------------------------------------------------------------- normalizer


@FUZZ
@given(raw=raw_results, use_stage=st.booleans(), inline_limit=st.sampled_from([0, 16, 65536]))
def test_normalizer_never_raises_and_output_is_json(
    raw: Any, use_stage: bool, inline_limit: int
) -> None:
    result = normalize_tool_result(
        raw, stage=stage if use_stage else None, inline_limit=inline_limit, max_text=200
    )
    as_dict = result.to_dict()
    encoded = json.dumps(as_dict, allow_nan=False).encode("utf-8")  # strict JSON, valid UTF-8
    assert b"\\u0000" not in encoded  # storable in PostgreSQL jsonb
    for part in result.parts:
        assert part["type"] in {"text", "image", "file", "link", "ui", "error"}
        if part["type"] == "ui":
            assert part["uri"].lower().startswith("ui://")
            assert part["flavor"] in {"mcp-app", "html", "url", "remote-dom", "skybridge"}
            assert part["url"] is not None or part["contentHash"] in result.documents
        if part["type"] == "link" and part["clickable"]:
            assert part["uri"].lower().startswith(("http://", "https://"))
        if part["type"] in {"image", "file"}:
            assert ("src" in part) != ("asset" in part)
            if "src" in part:
                assert part["src"].startswith(f"data:{part['mimeType']};base64,")
    assert sum(len(p["text"]) for p in result.parts if p["type"] == "text") <= 200
    sanitized = build_sanitized_tool_result(result, tool_name="t", tool_call_id="c", server="s")
    assert isinstance(text_fallback(sanitized), str)
    json.dumps(model_content(sanitized), allow_nan=False)


SENTINEL = "zzSENTINELzz"


def plant(value: Any, depth: int) -> Any:
    """Wrap the sentinel into a structure of the given depth, as key and value."""
    planted: Any = SENTINEL
    for level in range(depth):
        planted = {SENTINEL: planted, "k": [planted]} if level % 2 else [planted, {"x": SENTINEL}]
    return {"ui": {"x": planted}, SENTINEL: planted, "v": value}


@FUZZ
@given(raw=raw_results, depth=st.integers(min_value=0, max_value=8), extra=json_values)
def test_meta_never_reaches_the_model(raw: Any, depth: int, extra: Any) -> None:
    if not isinstance(raw, dict):
        raw = {}
    raw = dict(raw)
    # Keep content free of the sentinel so any leak must come from _meta.
    assert SENTINEL not in json.dumps(raw.get("content"), default=repr)
    raw["_meta"] = plant(extra, depth)
    content = raw.get("content")
    if isinstance(content, list):
        content = list(content)
        for index, block in enumerate(content):
            if isinstance(block, dict) and isinstance(block.get("resource"), dict):
                resource = dict(block["resource"])
                resource["_meta"] = plant(extra, depth)
                content[index] = {**block, "resource": resource, "_meta": plant(extra, depth)}
        raw["content"] = content
    structured = raw.get("structuredContent")
    if SENTINEL in json.dumps(structured, default=repr):
        raw.pop("structuredContent")
    sanitized = build_sanitized_tool_result(
        normalize_tool_result(raw), tool_name="t", tool_call_id="c", server="s"
    )
    assert SENTINEL not in json.dumps(model_content(sanitized))


# --------------------------------------------------------------------------- CSP

domain_like = st.one_of(
    st.text(max_size=40),
    st.builds(
        lambda scheme, wildcard, host, port, tail: f"{scheme}{wildcard}{host}{port}{tail}",
        st.sampled_from(
            [
                "https://",
                "http://",
                "wss://",
                "ws://",
                "data:",
                "blob:",
                "javascript:",
                "",
                "//",
                "HTTPS://",
            ]
        ),
        st.sampled_from(["", "*.", "*", "a.*."]),
        st.sampled_from(
            [
                "example.com",
                "a.example.com",
                "localhost",
                "127.0.0.1",
                "[::1]",
                "xn--p1ai",
                "ex ample.com",
                "bücher.de",
                "com",
            ]
        ),
        st.sampled_from(["", ":8080", ":443", ":*", ":0", ":99999"]),
        st.sampled_from(
            [
                "",
                "/",
                "/path",
                "; script-src *",
                "'",
                ",https://b.example",
                "\n",
                "\x00",
                "'unsafe-eval'",
            ]
        ),
    ),
    st.sampled_from(
        [
            "'self'",
            "'unsafe-inline'",
            "'unsafe-eval'",
            "'none'",
            "*",
            "'nonce-x'",
            "'sha256-abc='",
            "data:",
            "blob:",
        ]
    ),
    anything,
)
declared_csp = st.one_of(
    st.dictionaries(
        st.sampled_from(list(CSP_CATEGORIES)),
        st.lists(domain_like, max_size=5) | anything,
        max_size=4,
    ),
    anything,
)
allowed_csp = st.one_of(
    st.none(),
    st.lists(domain_like, max_size=5),
    st.dictionaries(
        st.sampled_from(list(CSP_CATEGORIES)), st.lists(domain_like, max_size=5), max_size=4
    ),
    anything,
)
KEYWORDS = {"'self'", "'unsafe-inline'", "'unsafe-eval'", "'none'", "data:", "blob:"}


@FUZZ
@given(declared=declared_csp, allowed=allowed_csp)
def test_csp_never_takes_keywords_or_wildcards_from_input(declared: Any, allowed: Any) -> None:
    result = build_csp(declared, allowed=allowed)
    script_sources = result.directives["script-src"]
    # The host's own sources (no network path: docs/sandbox.md), never taken from input.
    host_sources = ["'self'", "'unsafe-inline'", "'unsafe-eval'", "blob:", "data:"]
    assert script_sources[: len(host_sources)] == host_sources
    for source in script_sources[len(host_sources) :]:
        assert validate_domain(source) == (source, None)
        assert source in result.effective["resourceDomains"]
    for name, sources in result.directives.items():
        for source in sources:
            assert source != "*"
            assert not any(ch in source for ch in ';,"`\\ \t\r\n\x00')
            if source in KEYWORDS:
                continue
            assert "'" not in source, (name, source)
            assert validate_domain(source) == (source, None)
    header = result.header()
    assert header.count(";") == len(result.directives) - 1
    assert "strict-dynamic" not in header and "nonce-" not in header
    # 'unsafe-eval' is the host's own, in script-src only (no network path: docs/sandbox.md).
    assert [name for name, sources in result.directives.items() if "'unsafe-eval'" in sources] == [
        "script-src"
    ]
    # Effective domains never exceed what was declared (allowed can only narrow).
    if allowed is not None:
        unrestricted = build_csp(declared)
        for category, values in result.effective.items():
            assert set(values) <= set(unrestricted.effective[category])


@FUZZ
@given(value=domain_like)
def test_validate_domain_is_idempotent_and_safe(value: Any) -> None:
    normalized, reason = validate_domain(value)
    assert (normalized is None) != (reason is None)
    if normalized is not None:
        assert validate_domain(normalized) == (normalized, None)
        assert normalized.split("://", 1)[0] in {"http", "https", "ws", "wss"}
        assert normalized.isascii() and normalized == normalized.lower()


@FUZZ
@given(
    declared=anything | st.dictionaries(st.text(max_size=15), anything, max_size=5),
    granted=st.sets(st.text(max_size=15), max_size=5),
)
def test_permissions_allow_attribute_only_emits_known_features(
    declared: Any, granted: set[str]
) -> None:
    attribute, names = permissions_allow_attribute(declared, granted)
    assert set(names) <= granted & {"camera", "microphone", "geolocation", "clipboardWrite"}
    features = [feature for feature in attribute.split("; ") if feature]
    assert set(features) <= {"camera", "microphone", "geolocation", "clipboard-write"}


# --------------------------------------------------------------------------- metadata


@FUZZ
@given(
    tool=st.one_of(
        st.fixed_dictionaries(
            {},
            optional={
                "name": anything,
                "_meta": meta_values,
                "annotations": st.dictionaries(st.text(max_size=15), anything) | anything,
            },
        ),
        anything,
    )
)
def test_parse_tool_ui_never_raises(tool: Any) -> None:
    parsed = parse_tool_ui(tool)
    assert parsed.resource_uri is None or parsed.resource_uri.lower().startswith("ui://")
    assert set(parsed.visibility) <= {"model", "app"}
    assert all(
        isinstance(value, bool) for key, value in parsed.annotations.items() if key != "title"
    )
    json.dumps(parsed.to_dict())


@FUZZ
@given(content_meta=meta_values, listing_meta=meta_values)
def test_parse_resource_ui_never_raises(content_meta: Any, listing_meta: Any) -> None:
    parsed = parse_resource_ui(content_meta, listing_meta)
    json.dumps(parsed.to_dict(), allow_nan=False)
    json.dumps(parsed.initial_render_data, allow_nan=False)
    assert parsed.prefers_border in (None, True, False)


# --------------------------------------------------------------------------- partial JSON

json_objects = st.dictionaries(
    st.text(max_size=6),
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=12),
        lambda children: (
            st.lists(children, max_size=3)
            | st.dictionaries(st.text(max_size=6), children, max_size=3)
        ),
        max_leaves=8,
    ),
    max_size=4,
)


@settings(max_examples=100, deadline=None)
@given(
    final=json_objects,
    ensure_ascii=st.booleans(),
    indent=st.sampled_from([None, 0, 2]),
    compact=st.booleans(),
)
def test_every_prefix_of_a_json_object_is_consistent(
    final: dict[str, Any], ensure_ascii: bool, indent: int | None, compact: bool
) -> None:
    separators = (",", ":") if compact else None
    text = json.dumps(final, ensure_ascii=ensure_ascii, indent=indent, separators=separators)
    for cut in range(len(text) + 1):
        partial = repair_partial_json(text[:cut])
        assert partial is None or consistent(partial, final), (text[:cut], partial)
        if cut > 0:
            assert partial is not None, text[:cut]  # after "{" something is always recoverable
    assert repair_partial_json(text) == final


@settings(max_examples=200, deadline=None)
@given(fragment=st.text(max_size=60))
def test_repair_never_raises_on_arbitrary_text(fragment: str) -> None:
    result = repair_partial_json(fragment)
    assert result is None or isinstance(result, dict)
