"""A real browser against a real server: Debian's chromium driven by Playwright, talking to
daphne serving the app in embedded mode (SQLite, the in-process Celery worker and the
provider simulator), exactly what `make run` starts. Nothing is downloaded.

Scenario (issue 2): log in, start a session, ask to list the files and read README.md, see
streamed text and two tool cards, reload in the middle of the stream and find nothing lost or
duplicated; then the same page at a 390×844 phone viewport without horizontal scrolling.
"""

from __future__ import annotations

import httpx
import pytest

from tests.browser.conftest import sim_headers
from tests.browser.conftest import logged_in
from tests.browser.conftest import send_message

pytestmark = pytest.mark.browser

FINAL_WORDS = 90
"""Words in the scripted final answer, streamed one token at a time."""
TOKEN_DELAY = 0.06
"""Seconds per streamed token of the final answer: about 5 s of streaming to reload into."""
FINAL_TEXT = "Done listing. " + " ".join(f"word{n:03d}" for n in range(FINAL_WORDS)) + " END."


def script_demo(sim_url: str) -> None:
    """Tool calls first (fast), then a slow final answer once the tool results are in."""
    rules = [
        {"tool_result": "README", "text": FINAL_TEXT, "token_delay": TOKEN_DELAY},
        {"user": "list the files", "text": "I'll list the files and read README.md.",
         "tool_calls": [{"name": "terminal", "input": {"command": "ls -la", "timeout": 30}},
                        {"name": "read_file", "input": {"path": "README.md"}}],
         "token_delay": 0.005},
    ]
    response = httpx.post(f"{sim_url}/_sim/script", json={"rules": rules},
                          headers=sim_headers(sim_url), timeout=10)
    response.raise_for_status()


def transcript_counts(page) -> dict:
    return page.evaluate("""() => {
        const t = document.getElementById('transcript');
        const text = t.innerText;
        return {
            cards: t.querySelectorAll('.tool-card').length,
            done_cards: t.querySelectorAll('.tool-card[data-status=done]').length,
            users: t.querySelectorAll('.msg-user').length,
            final: text.split('Done listing.').length - 1,
            last_word: text.split('word089').length - 1,
            ends: text.split('END.').length - 1,
            streaming: !!document.getElementById('streaming'),
            usage: t.querySelectorAll('.usage').length,
        };
    }""")


def test_chat_streams_tools_survives_reload_and_fits_a_phone(server, browser):
    url, sim_url, password = server
    script_demo(sim_url)
    context, page = logged_in(browser, url, "demo", password)
    page.click("#new-session")
    page.wait_for_selector("#composer-text")
    chat_url = page.url

    send_message(page, "list the files and read README.md")
    # The tool cards arrive over the socket and finish.
    page.wait_for_selector(".tool-card[data-status=done] >> nth=1", timeout=30_000)
    assert page.locator(".tool-card .tool-name").all_inner_texts() == ["terminal", "read_file"]
    assert page.input_value("#composer-text") == ""
    # The final answer streams: the bubble grows.
    page.wait_for_function("() => (document.querySelector('#streaming .stream-text') || "
                           "{textContent: ''}).textContent.includes('word005')", timeout=30_000)
    first = page.locator("#streaming .stream-text").inner_text()
    page.wait_for_function(f"() => document.querySelector('#streaming .stream-text')"
                           f".textContent.length > {len(first) + 20}", timeout=10_000)
    assert page.get_attribute("#turn-status", "data-state") == "running"
    assert page.is_visible("#stop-button")

    # Reload in the middle of the stream.
    page.reload()
    mid = transcript_counts(page)
    assert mid["ends"] == 0, "the reload should land mid-stream"
    assert mid["streaming"] and mid["final"] == 1
    page.wait_for_selector("#transcript >> text=END.", timeout=30_000)
    page.wait_for_selector("#turn-status[data-state=idle]", timeout=30_000)
    page.wait_for_selector(".usage", timeout=10_000)
    live = transcript_counts(page)
    assert live == {"cards": 2, "done_cards": 2, "users": 1, "final": 1, "last_word": 1,
                    "ends": 1, "streaming": False, "usage": 1}
    streamed = page.locator("#transcript").inner_text()
    assert " ".join(f"word{n:03d}" for n in range(FINAL_WORDS)) in " ".join(streamed.split())

    # A fresh server render shows the same transcript, once.
    page.goto(chat_url)
    assert transcript_counts(page) == live

    # The same page on a phone, with the tool cards opened.
    phone = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True,
                                has_touch=True, storage_state=context.storage_state())
    mobile = phone.new_page()
    mobile.goto(chat_url)
    mobile.wait_for_selector(".tool-card")
    for summary in mobile.locator(".tool-card > summary").all():
        summary.click()
    assert transcript_counts(mobile)["cards"] == 2
    scroll_width = mobile.evaluate("() => document.scrollingElement.scrollWidth")
    assert scroll_width <= 390
    phone.close()
    context.close()
