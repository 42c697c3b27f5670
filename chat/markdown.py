"""Safe Markdown for messages: no raw HTML from anyone, only harmless link schemes."""

from __future__ import annotations

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


_md.validateLink = _validate_link


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
