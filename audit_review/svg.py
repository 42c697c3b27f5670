"""Server-rendered SVG charts for the audit reports. Pure Python: no Django imports.

The host pages run under a strict CSP (``style-src 'self'``, no inline styles), so charts are
plain inline SVG that uses presentation attributes only (``fill=``, ``stroke=``,
``font-size=``), never ``style=""`` or ``<style>``. Text, axes and grid lines use
``currentColor``: they follow the surrounding page's text colour, so one chart works on a
light and on a dark page. Data colours come from a palette whose every colour keeps at least
3:1 contrast against both a white and a near-black background (WCAG 1.4.11).

Every chart is ``role="img"`` with an SVG ``<title>`` and ``<desc>`` (announced by screen
readers), and every bar carries its own ``<title>`` (a tooltip with the exact numbers).
Every piece of text that reaches the output is XML-escaped, so hostile tool names or
reasons cannot break out of the document.

Charts:

- :func:`stacked_columns` — vertical stacked bars over ordered categories (days, buckets);
- :func:`horizontal_bars` — ranked rows (top tools, denial reasons), stacked by series.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape as _xml_escape

__all__ = [
    "PALETTE",
    "Row",
    "Series",
    "escape",
    "format_number",
    "horizontal_bars",
    "nice_ticks",
    "stacked_columns",
]

# Okabe–Ito inspired, tuned so that each colour has >= 3:1 contrast against #ffffff and
# against #17181c (light and dark page backgrounds).
PALETTE: tuple[str, ...] = (
    "#2f7fd1",  # blue
    "#0f8a6c",  # bluish green
    "#e0533d",  # vermillion
    "#b7791f",  # amber
    "#b0579a",  # reddish purple
    "#7c7f88",  # grey
)

FONT_FAMILY = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"
_ID_RE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True, slots=True)
class Series:
    """One stacked layer: its key in the values, its legend label, its colour."""

    key: str
    label: str
    color: str


@dataclass(frozen=True, slots=True)
class Row:
    """One row of a horizontal bar chart."""

    label: str
    values: Mapping[str, float]
    href: str | None = None
    tooltip: str | None = None

    @property
    def total(self) -> float:
        return float(sum(v for v in self.values.values() if v))


def escape(value: object) -> str:
    """XML-escape text and attribute values (quotes included)."""
    return _xml_escape(str(value), {'"': "&quot;", "'": "&#x27;"})


def _id(value: str) -> str:
    cleaned = _ID_RE.sub("-", value) or "chart"
    return cleaned if cleaned[0].isalpha() else f"c-{cleaned}"


def format_number(value: float) -> str:
    """``1234`` → ``"1,234"``, ``12345`` → ``"12.3k"``, ``2.5`` → ``"2.5"``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if abs(value) >= 1_000_000:
        return f"{value / 1_000_000:.1f}M".replace(".0M", "M")
    if abs(value) >= 10_000:
        return f"{value / 1000:.1f}k".replace(".0k", "k")
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.1f}"


def nice_ticks(maximum: float, *, count: int = 5, integer: bool = True) -> list[float]:
    """Round tick values from 0 up to (at least) ``maximum``: 0, 5, 10, 15, 20…"""
    if maximum <= 0 or not math.isfinite(maximum):
        return [0, 1] if integer else [0.0, 1.0]
    raw = maximum / max(count, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    for multiple in (1, 2, 2.5, 5, 10):
        step = multiple * magnitude
        if step >= raw:
            break
    if integer:
        step = max(1, math.ceil(step))
    top = math.ceil(maximum / step) * step
    ticks = []
    value = 0.0
    while value <= top + step / 1000:
        ticks.append(int(round(value)) if integer else round(value, 10))
        value += step
    return ticks


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(1, limit - 1)] + "…"


def _open_svg(chart_id: str, width: int, height: int, title: str, description: str) -> list[str]:
    cid = _id(chart_id)
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart-svg" id="{cid}" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-labelledby="{cid}-title {cid}-desc" font-family="{escape(FONT_FAMILY)}" '
        f'font-size="12" fill="currentColor">',
        f'<title id="{cid}-title">{escape(title)}</title>',
        f'<desc id="{cid}-desc">{escape(description)}</desc>',
        # Host stylesheets may style `svg` itself (icon rules such as fill: none; stroke:
        # currentColor); a group's presentation attributes reset what its children inherit.
        '<g fill="currentColor" stroke="none">',
    ]


def _legend(series: Sequence[Series], x: float, y: float, max_x: float) -> list[str]:
    """Swatches and labels in one row (wrapping when needed), starting at (x, y)."""
    parts = ['<g class="legend">']
    cx, cy = x, y
    for item in series:
        width = 18 + 7 * len(item.label)
        if cx + width > max_x and cx > x:
            cx, cy = x, cy + 18
        parts.append(
            f'<rect x="{cx:.1f}" y="{cy - 9:.1f}" width="10" height="10" rx="2" '
            f'fill="{escape(item.color)}"/>'
            f'<text x="{cx + 14:.1f}" y="{cy:.1f}" font-size="12">{escape(item.label)}</text>'
        )
        cx += width + 12
    parts.append("</g>")
    return parts


def _legend_height(series: Sequence[Series], width: float) -> int:
    rows, cx = 1, 0.0
    for item in series:
        w = 18 + 7 * len(item.label) + 12
        if cx + w > width and cx > 0:
            rows, cx = rows + 1, 0.0
        cx += w
    return rows * 18


def _empty(parts: list[str], width: int, height: int, message: str) -> str:
    parts.append(
        f'<text x="{width / 2:.1f}" y="{height / 2:.1f}" text-anchor="middle" '
        f'font-size="14" fill-opacity="0.7">{escape(message)}</text>'
    )
    parts.append("</g></svg>")
    return "".join(parts)


def stacked_columns(
    *,
    chart_id: str,
    title: str,
    description: str,
    categories: Sequence[str],
    series: Sequence[Series],
    values: Mapping[str, Sequence[float]],
    y_label: str = "",
    x_label: str = "",
    tooltips: Sequence[str] | None = None,
    hrefs: Sequence[str | None] | None = None,
    width: int = 960,
    height: int = 300,
    empty_message: str = "No data for these filters.",
) -> str:
    """Vertical bars, one per category, stacked by series (in ``series`` order).

    ``values[series.key][i]`` is the value of series ``key`` in category ``i``.
    ``tooltips[i]`` names category ``i`` in tooltips (defaults to the category label);
    ``hrefs[i]`` turns the column into a link (e.g. a drill-down).
    """
    parts = _open_svg(chart_id, width, height, title, description)
    n = len(categories)
    totals = [sum(float(values.get(s.key, [0] * n)[i] or 0) for s in series) for i in range(n)]
    if not n or not any(totals):
        return _empty(parts, width, height, empty_message)

    legend_h = _legend_height(series, width - 60)
    top = 12 + legend_h + 8
    left, right = 56, 16
    bottom = 34 + (18 if x_label else 0)
    plot_w = width - left - right
    plot_h = height - top - bottom
    ticks = nice_ticks(max(totals))
    y_max = ticks[-1] or 1

    def y_of(value: float) -> float:
        return top + plot_h - (value / y_max) * plot_h

    parts.extend(_legend(series, left, 14, width - right))
    # Grid and y axis.
    parts.append('<g class="axis y-axis">')
    for tick in ticks:
        y = y_of(tick)
        parts.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" '
            f'stroke="currentColor" stroke-opacity="{0.35 if tick == 0 else 0.12}" '
            f'stroke-width="1"/>'
            f'<text x="{left - 8}" y="{y + 4:.1f}" text-anchor="end" font-size="11" '
            f'fill-opacity="0.75">{escape(format_number(tick))}</text>'
        )
    if y_label:
        cy = top + plot_h / 2
        parts.append(
            f'<text x="14" y="{cy:.1f}" transform="rotate(-90 14 {cy:.1f})" '
            f'text-anchor="middle" font-size="11" fill-opacity="0.75">{escape(y_label)}</text>'
        )
    parts.append("</g>")

    slot = plot_w / n
    bar_w = max(2.0, min(48.0, slot * 0.72))
    label_every = max(1, math.ceil(n / max(1, int(plot_w // 64))))
    parts.append('<g class="bars">')
    for i, category in enumerate(categories):
        x = left + i * slot + (slot - bar_w) / 2
        name = tooltips[i] if tooltips and i < len(tooltips) else category
        details = [
            f"{s.label}: {format_number(float(values.get(s.key, [0] * n)[i] or 0))}"
            for s in series
            if values.get(s.key, [0] * n)[i]
        ]
        href = hrefs[i] if hrefs and i < len(hrefs) else None
        group_open = f'<a href="{escape(href)}" class="bar-link">' if href and totals[i] else "<g>"
        parts.append(group_open)
        parts.append(
            f"<title>{escape(name)} — total {escape(format_number(totals[i]))}"
            + (f" ({escape(', '.join(details))})" if details else "")
            + "</title>"
        )
        running = 0.0
        for s in series:
            value = float(values.get(s.key, [0] * n)[i] or 0)
            if value <= 0:
                continue
            y_top = y_of(running + value)
            h = y_of(running) - y_top
            parts.append(
                f'<rect x="{x:.1f}" y="{y_top:.1f}" width="{bar_w:.1f}" '
                f'height="{max(h, 0.5):.1f}" fill="{escape(s.color)}" data-series="{escape(s.key)}">'
                f"<title>{escape(name)} · {escape(s.label)}: {escape(format_number(value))}"
                "</title></rect>"
            )
            running += value
        parts.append("</a>" if href and totals[i] else "</g>")
        if i % label_every == 0:
            cx = left + i * slot + slot / 2
            parts.append(
                f'<text x="{cx:.1f}" y="{top + plot_h + 16:.1f}" text-anchor="middle" '
                f'font-size="11" fill-opacity="0.75">{escape(_truncate(category, 12))}</text>'
            )
    parts.append("</g>")
    if x_label:
        parts.append(
            f'<text x="{left + plot_w / 2:.1f}" y="{height - 6}" text-anchor="middle" '
            f'font-size="11" fill-opacity="0.75">{escape(x_label)}</text>'
        )
    parts.append("</g></svg>")
    return "".join(parts)


def horizontal_bars(
    *,
    chart_id: str,
    title: str,
    description: str,
    rows: Sequence[Row],
    series: Sequence[Series],
    x_label: str = "",
    width: int = 560,
    label_width: int = 190,
    row_height: int = 26,
    empty_message: str = "No data for these filters.",
) -> str:
    """Ranked rows (largest first, as given), each bar stacked by series, total at its end."""
    if not rows or not any(r.total for r in rows):
        return _empty(
            _open_svg(chart_id, width, 140, title, description), width, 140, empty_message
        )
    show_legend = len(series) > 1
    legend_h = _legend_height(series, width - 20) + 10 if show_legend else 0
    top = 8 + legend_h
    bottom = 28 + (16 if x_label else 0)
    height = top + len(rows) * row_height + bottom
    parts = _open_svg(chart_id, width, height, title, description)

    left = label_width
    right = 48
    plot_w = width - left - right
    plot_h = len(rows) * row_height
    ticks = nice_ticks(max(r.total for r in rows), count=4)
    x_max = ticks[-1] or 1

    def x_of(value: float) -> float:
        return left + (value / x_max) * plot_w

    if show_legend:
        parts.extend(_legend(series, 8, 18, width - 8))
    parts.append('<g class="axis x-axis">')
    for tick in ticks:
        x = x_of(tick)
        parts.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + plot_h}" '
            f'stroke="currentColor" stroke-opacity="{0.35 if tick == 0 else 0.12}" '
            f'stroke-width="1"/>'
            f'<text x="{x:.1f}" y="{top + plot_h + 16}" text-anchor="middle" font-size="11" '
            f'fill-opacity="0.75">{escape(format_number(tick))}</text>'
        )
    if x_label:
        parts.append(
            f'<text x="{left + plot_w / 2:.1f}" y="{height - 6}" text-anchor="middle" '
            f'font-size="11" fill-opacity="0.75">{escape(x_label)}</text>'
        )
    parts.append("</g>")

    bar_h = min(18, row_height - 8)
    max_chars = max(6, int((label_width - 14) / 6.6))
    parts.append('<g class="bars">')
    for i, row in enumerate(rows):
        y = top + i * row_height + (row_height - bar_h) / 2
        name = row.tooltip or row.label
        details = [
            f"{s.label}: {format_number(float(row.values.get(s.key) or 0))}"
            for s in series
            if row.values.get(s.key)
        ]
        parts.append(f'<a href="{escape(row.href)}" class="bar-link">' if row.href else "<g>")
        parts.append(
            f"<title>{escape(name)} — total {escape(format_number(row.total))}"
            + (f" ({escape(', '.join(details))})" if len(details) > 1 else "")
            + "</title>"
        )
        parts.append(
            f'<text x="{left - 10}" y="{y + bar_h / 2 + 4:.1f}" text-anchor="end" '
            f'font-size="12">{escape(_truncate(row.label, max_chars))}</text>'
        )
        running = 0.0
        for s in series:
            value = float(row.values.get(s.key) or 0)
            if value <= 0:
                continue
            x0 = x_of(running)
            w = x_of(running + value) - x0
            parts.append(
                f'<rect x="{x0:.1f}" y="{y:.1f}" width="{max(w, 0.5):.1f}" height="{bar_h}" '
                f'fill="{escape(s.color)}" data-series="{escape(s.key)}">'
                f"<title>{escape(name)} · {escape(s.label)}: {escape(format_number(value))}"
                "</title></rect>"
            )
            running += value
        parts.append(
            f'<text x="{x_of(running) + 6:.1f}" y="{y + bar_h / 2 + 4:.1f}" font-size="11" '
            f'font-weight="600">{escape(format_number(row.total))}</text>'
        )
        parts.append("</a>" if row.href else "</g>")
    parts.append("</g></g></svg>")
    return "".join(parts)
