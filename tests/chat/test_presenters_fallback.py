"""The app view's text fallback is computed once, on the server (chat/presenters.py); the
browser shows what the payload carries."""

from __future__ import annotations

from chat.presenters import app_view_text_fallback

UI = {"type": "ui", "uri": "ui://board/list.html"}


def test_a_call_without_an_app_view_carries_no_fallback():
    result = {"parts": [{"type": "text", "text": "plain"}]}
    assert app_view_text_fallback(result, has_view=False) is None


def test_no_result_yet_carries_no_fallback():
    assert app_view_text_fallback(None, has_view=True) is None


def test_text_parts_without_the_line_for_the_view_itself():
    result = {"parts": [{"type": "text", "text": "3 cards"}, UI, {"type": "text", "text": "ok"}]}
    assert app_view_text_fallback(result, has_view=False) == "3 cards\nok"


def test_structured_data_stands_in_when_there_is_no_text():
    result = {"parts": [UI], "structured": {"cards": 3}}
    assert app_view_text_fallback(result, has_view=True) == '{"cards":3}'


def test_media_and_links_get_their_one_line_descriptions():
    result = {
        "parts": [
            {"type": "text", "text": "see"},
            {"type": "link", "uri": "https://example.com/a", "name": "A"},
        ]
    }
    assert app_view_text_fallback(result, has_view=True) == "see\n[link: A — https://example.com/a]"


def test_parts_meant_for_the_model_only_are_left_out():
    result = {"parts": [{"type": "text", "text": "secret", "audience": ["assistant"]}, UI]}
    assert app_view_text_fallback(result, has_view=True) == "(The tool returned no content.)"
