"""Plain tests of the seams of mcp_bridge.normalize (each module on its own)."""

from __future__ import annotations

import pytest

from mcp_bridge.normalize.fields import clean_uri, filename_from_uri, optional_text
from mcp_bridge.normalize.limits import MAX_FILENAME_LENGTH, TextBudget, human_size
from mcp_bridge.normalize.media import base64_decoded_size, decode_base64, media_kind_for
from mcp_bridge.normalize.result import NormalizedResult, block_audience
from mcp_bridge.normalize.structured import read_result_meta, read_structured_content


def test_text_budget_keeps_what_fits_and_counts_every_cut() -> None:
    budget = TextBudget(10)
    assert budget.take("abcdef") == ("abcdef", False)
    assert budget.take("ghijkl") == ("ghij", True)
    assert budget.take("mn") == ("", True)
    assert budget.cut == 4
    assert budget.notice() == (
        "Text output was too long: 4 characters beyond the 10-character limit were cut."
    )


def test_text_budget_of_exactly_the_limit_cuts_nothing() -> None:
    budget = TextBudget(3)
    assert budget.take("abc") == ("abc", False)
    assert budget.take("") == ("", False)
    assert budget.cut == 0


@pytest.mark.parametrize(
    ("size", "shown"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1 KB"),
        (1536, "1.5 KB"),
        (12 * 1024, "12 KB"),
        (5 * 1024 * 1024, "5 MB"),
        (3 * 1024**3, "3 GB"),
        (-1, None),
        (True, None),
        ("12", None),
    ],
)
def test_human_size(size: object, shown: str | None) -> None:
    assert human_size(size) == shown


def test_filename_from_uri_is_safe_and_bounded() -> None:
    assert filename_from_uri("https://x.test/a/b/report%20final.pdf?x=1") == "report final.pdf"
    assert filename_from_uri("file:///tmp/..") is None
    assert filename_from_uri(None) is None
    assert filename_from_uri("https://x.test/a%2Fb%3Ac.txt") == "a_b_c.txt"
    long_name = filename_from_uri("https://x.test/" + "n" * 500 + ".mp4")
    assert long_name is not None
    assert len(long_name) == MAX_FILENAME_LENGTH and long_name.endswith(".mp4")


def test_clean_uri_and_optional_text() -> None:
    assert clean_uri("  ui://board/main  ") == "ui://board/main"
    assert clean_uri("ui://a\nb") is None
    assert clean_uri("x" * 5000) is None
    assert clean_uri(7) is None
    assert optional_text("  name  ", 3) == "nam"
    assert optional_text("   ", 10) is None


def test_base64_helpers() -> None:
    assert decode_base64("aGk=") == b"hi"
    assert decode_base64("aG\nk=") == b"hi"
    assert decode_base64("a$k=") is None
    assert base64_decoded_size("aGk=") == 2
    assert base64_decoded_size("aGk") is None
    assert media_kind_for("video/mp4") == "video"
    assert media_kind_for("application/pdf") == "binary"


def test_block_audience_restricts_only_to_one_named_audience() -> None:
    assert block_audience({"annotations": {"audience": ["user"]}}) == ["user"]
    assert block_audience({"annotations": {"audience": ["user", "assistant"]}}) is None
    assert block_audience({"annotations": {"audience": "user"}}) is None
    assert block_audience({}) is None


def test_structured_content_and_meta_are_kept_or_reported() -> None:
    result = NormalizedResult()
    read_structured_content({"structuredContent": {"rows": [1, 2]}}, result)
    read_result_meta({"_meta": {"ui": {"theme": "dark"}}}, result)
    assert result.structured == {"rows": [1, 2]}
    assert result.ui_meta == {"ui": {"theme": "dark"}}
    assert result.parts == []

    refused = NormalizedResult()
    read_structured_content({"structuredContent": [1]}, refused)
    read_result_meta({"_meta": "x"}, refused)
    assert refused.structured is None and refused.ui_meta is None
    assert [part["code"] for part in refused.parts] == [
        "invalid_structured_content",
        "invalid_meta",
    ]
