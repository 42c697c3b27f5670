"""Safe Markdown for messages: no raw HTML from anyone, only harmless link schemes."""

from __future__ import annotations

import re
from functools import lru_cache

from markdown_it import MarkdownIt

SAFE_LINK_SCHEMES = ("http:", "https:", "mailto:")

_md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
_md.enable(["table", "strikethrough"])


def _validate_link(url: str) -> bool:
    lowered = url.strip().lower()
    if ":" not in lowered.split("/", 1)[0]:
        return True  # relative links and fragments
    return lowered.startswith(SAFE_LINK_SCHEMES)


# markdown-it-py's documented hook for link checks is replacing this method.
_md.validateLink = _validate_link  # type: ignore[method-assign]


def _open_links_in_new_tab(self, tokens, idx, options, env):  # type: ignore[no-untyped-def]
    tokens[idx].attrSet("target", "_blank")
    tokens[idx].attrSet("rel", "noopener noreferrer nofollow")
    return self.renderToken(tokens, idx, options, env)


_md.add_render_rule("link_open", _open_links_in_new_tab)


# Rendering is pure and costs ~0.3-0.8 ms a message; a thread page renders every message
# of the thread on every load. Cache the common (short) texts; long ones render each time.
CACHED_TEXT_LIMIT = 8 * 1024


@lru_cache(maxsize=8192)
def _render_cached(text: str) -> str:
    return _md.render(text)


def render_markdown(text: str) -> str:
    """Markdown → HTML with raw HTML escaped (markdown-it with html disabled)."""
    text = text or ""
    if len(text) <= CACHED_TEXT_LIMIT:
        return _render_cached(text)
    return _md.render(text)


# Text from elsewhere (an MCP server's tool names and descriptions) placed in Markdown that
# Atrium writes: it must stay text — no links, emphasis, code spans or HTML of its own.
_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")  # every ASCII punctuation (CommonMark)
_BACKTICK_RUNS = re.compile(r"`+")


def escape_markdown(text: str) -> str:
    """``text`` as literal Markdown text on one line (every ASCII punctuation escaped)."""
    return _PUNCTUATION.sub(r"\\\1", " ".join((text or "").split()))


def code_span(text: str) -> str:
    """``text`` as one inline code span, whatever backticks it holds (the fence is longer
    than its longest run of backticks, as CommonMark allows)."""
    flat = " ".join((text or "").split())
    fence = "`" * (max((len(r) for r in _BACKTICK_RUNS.findall(flat)), default=0) + 1)
    return (
        f"{fence} {flat} {fence}"
        if flat.startswith("`") or flat.endswith("`")
        else (f"{fence}{flat}{fence}")
    )
