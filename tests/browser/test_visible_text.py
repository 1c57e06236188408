"""Hidden and bidi characters in streamed text are drawn visible in the browser too: the live
text.delta frames carry the model's text as it is, and static/chat.js (visibleNodes) turns
each character of sessions/visible.py's set (sent in #chat's data-visible) into the same
marked <span class="ctl">⟨U+202E⟩</span> the server draws. Arabic and Hebrew letters are
drawn as they are. The tool card's command and output arrive as server-rendered fragments
over the socket and are checked in the DOM as well. A real server (daphne, embedded mode,
the simulator) and Debian's chromium."""

from __future__ import annotations

import httpx
import pytest

from sessions.visible import visible_text
from tests.browser.conftest import click_new_session, logged_in, send_message, sim_headers

pytestmark = pytest.mark.browser

HIDDEN = ("\u202e", "\u2066", "\u2069", "\u200f", "\u200b", "\x1b", "\U000e0041")
"""A bidi override, two isolates, a mark, a zero-width space, ESC (a named one) and a tag
character (outside the BMP: JavaScript sees it as two UTF-16 units)."""
PREFIX = ("Reading report\u202etxt.exe now: \u2066abc\u2069 \x1b[2K \U000e0041"
          " مرحبا بالعالم \u200fשלום\u200b. ")
FINAL = PREFIX + " ".join(f"word{n:03d}" for n in range(60)) + " END."
COMMAND = "printf 'report\u202etxt.exe\\n'"


def script(sim_url: str) -> None:
    rules = [
        {"tool_result": "report", "text": FINAL, "token_delay": 0.05},
        {"user": "the report", "text": "Looking.",
         "tool_calls": [{"name": "terminal", "input": {"command": COMMAND, "timeout": 30}}]},
    ]
    httpx.post(f"{sim_url}/_sim/script", json={"rules": rules}, headers=sim_headers(sim_url),
               timeout=10).raise_for_status()


def test_streamed_text_and_tool_cards_show_hidden_characters(server, browser):
    url, sim_url, password = server
    script(sim_url)
    context, page = logged_in(browser, url, "demo", password)
    click_new_session(page)
    send_message(page, "read the report")
    # Mid-stream: the bubble chat.js fills from the text.delta frames.
    page.wait_for_function("() => (document.querySelector('#streaming .stream-text') || "
                           "{textContent: ''}).textContent.includes('word003')",
                           timeout=30_000)
    bubble = page.evaluate("""() => {
        const el = document.querySelector('#streaming .stream-text');
        return {text: el.textContent,
                marks: Array.from(el.querySelectorAll('span.ctl'), s => s.textContent)};
    }""")
    assert [c for c in HIDDEN if c in bubble["text"]] == []
    assert bubble["text"].startswith(visible_text(PREFIX))  # the server's escapes, exactly
    assert bubble["marks"] == ["⟨U+202E⟩", "⟨U+2066⟩", "⟨U+2069⟩", "⟨ESC⟩", "⟨U+E0041⟩",
                               "⟨U+200F⟩", "⟨U+200B⟩"]
    assert "مرحبا بالعالم" in bubble["text"] and "שלום" in bubble["text"]

    page.wait_for_selector("#turn-status[data-state=idle]", timeout=30_000)
    live = page.evaluate("""() => {
        const t = document.getElementById('transcript');
        const card = t.querySelector('.tool-card');
        return {text: t.textContent,
                args: card.querySelector('.tool-args pre').innerHTML,
                output: card.querySelector('.tool-output pre').innerHTML,
                reply: t.querySelector('.msg-assistant:last-of-type .msg-body').innerHTML};
    }""")
    assert [c for c in HIDDEN if c in live["text"]] == []
    mark = '<span class="ctl" title="hidden character">⟨U+202E⟩</span>'
    assert f"report{mark}txt.exe" in live["args"]  # the command, in the live card
    assert f"report{mark}txt.exe" in live["output"]  # what it printed
    assert f"report{mark}txt.exe" in live["reply"]  # the stored reply replaced the bubble
    context.close()
