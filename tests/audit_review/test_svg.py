"""audit_review.svg: pure chart rendering (no database)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from audit_review import svg

NS = "{http://www.w3.org/2000/svg}"
SERIES = [svg.Series("ok", "Allowed", "#0f8a6c"), svg.Series("no", "Denied", "#e0533d")]


def _parse(markup: str) -> ET.Element:
    return ET.fromstring(markup)


def _texts(root: ET.Element) -> list[str]:
    return [el.text or "" for el in root.iter(f"{NS}text")]


def _bars(root: ET.Element) -> list[ET.Element]:
    return [r for r in root.iter(f"{NS}rect") if r.get("data-series")]


def test_stacked_columns_draw_one_segment_per_nonzero_value_with_axes_and_legend():
    markup = svg.stacked_columns(
        chart_id="per day",
        title="Events per day",
        description="Three days.",
        categories=["Mar 1", "Mar 2", "Mar 3"],
        series=SERIES,
        values={"ok": [3, 0, 5], "no": [1, 2, 0]},
        y_label="Events",
        x_label="Day",
        hrefs=["?d=1", None, "?d=3"],
    )
    root = _parse(markup)
    assert root.get("role") == "img"
    assert root.get("id") == "per-day"  # made a valid id
    title = root.find(f"{NS}title")
    assert title is not None and title.text == "Events per day"
    assert root.get("aria-labelledby") == "per-day-title per-day-desc"
    bars = _bars(root)
    assert [(b.get("data-series"), b.get("fill")) for b in bars] == [
        ("ok", "#0f8a6c"),
        ("no", "#e0533d"),
        ("no", "#e0533d"),
        ("ok", "#0f8a6c"),
    ]
    texts = _texts(root)
    assert {"Mar 1", "Mar 2", "Mar 3", "Allowed", "Denied", "Events", "Day"} <= set(texts)
    assert "0" in texts and "5" in texts or "6" in texts  # y ticks
    # Each bar has its own tooltip; columns with data link when asked.
    assert all(b.find(f"{NS}title") is not None for b in bars)
    assert [a.get("href") for a in root.iter(f"{NS}a")] == ["?d=1", "?d=3"]
    # Presentation attributes only: nothing a strict style-src CSP would block.
    assert "style=" not in markup and "<style" not in markup


def test_taller_bars_for_larger_values():
    root = _parse(
        svg.stacked_columns(
            chart_id="c",
            title="t",
            description="d",
            categories=["a", "b"],
            series=SERIES[:1],
            values={"ok": [2, 8]},
        )
    )
    small, big = (float(b.get("height")) for b in _bars(root))
    assert big == pytest.approx(small * 4, rel=0.02)


def test_horizontal_bars_show_labels_totals_and_stacked_segments():
    rows = [
        svg.Row("board · delete_item", {"ok": 1, "no": 3}, href="?tool=delete_item"),
        svg.Row("board · list_items", {"ok": 2}),
    ]
    root = _parse(
        svg.horizontal_bars(
            chart_id="tools", title="Top tools", description="d", rows=rows, series=SERIES
        )
    )
    texts = _texts(root)
    assert "board · delete_item" in texts and "board · list_items" in texts
    assert "4" in texts and "2" in texts  # totals at the end of the bars
    assert len(_bars(root)) == 3
    widths = [float(b.get("width")) for b in _bars(root)]
    assert widths[0] + widths[1] == pytest.approx(2 * widths[2], rel=0.02)


def test_long_labels_are_truncated_but_kept_in_the_tooltip():
    name = "server · " + "x" * 80
    root = _parse(
        svg.horizontal_bars(
            chart_id="t",
            title="t",
            description="d",
            rows=[svg.Row(name, {"ok": 1})],
            series=SERIES[:1],
        )
    )
    assert any(t.endswith("…") and len(t) < 40 for t in _texts(root))
    assert any(name in (t.text or "") for t in root.iter(f"{NS}title"))


@pytest.mark.parametrize(
    "hostile",
    [
        "<script>alert(1)</script>",
        '"><img src=x onerror=alert(1)>',
        "]]><!--",
        "a & b ' \" < >",
    ],
)
def test_hostile_text_is_escaped_and_the_svg_stays_well_formed(hostile):
    markups = [
        svg.stacked_columns(
            chart_id=hostile,
            title=hostile,
            description=hostile,
            categories=[hostile],
            series=[svg.Series(hostile, hostile, '#000" onload="x')],
            values={hostile: [1]},
            hrefs=['javascript:alert(1)" onclick="x'],
            tooltips=[hostile],
        ),
        svg.horizontal_bars(
            chart_id="h",
            title=hostile,
            description=hostile,
            rows=[svg.Row(hostile, {hostile: 2}, href='?a="b"', tooltip=hostile)],
            series=[svg.Series(hostile, hostile, "#000")],
        ),
    ]
    for markup in markups:
        root = _parse(markup)  # raises if anything broke out
        assert "<script" not in markup and "<img" not in markup
        for el in root.iter():
            assert not any(attr.startswith("on") for attr in el.attrib), el.attrib
        assert hostile in "".join(t.text or "" for t in root.iter(f"{NS}title"))


def test_empty_charts_say_so():
    for markup in (
        svg.stacked_columns(
            chart_id="e", title="t", description="d", categories=[], series=SERIES, values={}
        ),
        svg.stacked_columns(
            chart_id="z",
            title="t",
            description="d",
            categories=["a"],
            series=SERIES,
            values={"ok": [0], "no": [0]},
            empty_message="Nothing here.",
        ),
        svg.horizontal_bars(chart_id="h", title="t", description="d", rows=[], series=SERIES),
    ):
        root = _parse(markup)
        assert not _bars(root)
        assert any(t.startswith(("No data", "Nothing")) for t in _texts(root))


def test_text_and_axes_follow_the_page_colour_and_palette_contrasts_both_themes():
    markup = svg.stacked_columns(
        chart_id="c",
        title="t",
        description="d",
        categories=["a"],
        series=SERIES,
        values={"ok": [1], "no": [1]},
    )
    root = _parse(markup)
    group = root.find(f"{NS}g")
    assert group is not None and group.get("fill") == "currentColor"
    assert group.get("stroke") == "none"
    assert all(line.get("stroke") == "currentColor" for line in root.iter(f"{NS}line"))

    def luminance(hex_colour: str) -> float:
        channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
        linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    def contrast(a: str, b: str) -> float:
        hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
        return (hi + 0.05) / (lo + 0.05)

    from audit_review.reports import DECISION_COLORS

    for colour in list(svg.PALETTE) + list(DECISION_COLORS.values()):
        assert contrast(colour, "#ffffff") >= 3, colour
        assert contrast(colour, "#17181c") >= 3, colour


@pytest.mark.parametrize(
    "maximum, expected_top",
    [(0, 1), (1, 1), (7, 8), (23, 25), (96, 100), (1234, 1250)],
)
def test_nice_ticks(maximum, expected_top):
    ticks = svg.nice_ticks(maximum)
    assert ticks[0] == 0 and ticks[-1] == expected_top
    assert ticks == sorted(set(ticks))


def test_format_number():
    assert svg.format_number(0) == "0"
    assert svg.format_number(1234) == "1,234"
    assert svg.format_number(12_345) == "12.3k"
    assert svg.format_number(2_000_000) == "2M"
    assert svg.format_number(2.5) == "2.5"
