"""The prefix discipline over a real browser conversation (issue 3, "Done when"): Debian's
chromium driven by Playwright talks to daphne in embedded mode (the server and browser
fixtures of tests/browser/test_chat.py) for 24 turns, some of them with a tool call; then the
provider simulator's own record of every request (GET /_sim/requests) is checked: no 400s,
each request reproduces the previous one byte for byte up to its earliest message breakpoint,
and every request after the first reads the prompt cache.
"""

from __future__ import annotations

import httpx
import pytest

from tests.browser.conftest import sim_headers
from tests.browser.conftest import logged_in
from tests.browser.conftest import send_message
from tests.sessions.test_prefix_discipline import earliest_message_breakpoint, holds

pytestmark = pytest.mark.browser

TURNS = 24
TOOL_EVERY = 4
"""Every 4th turn asks to list the files: one terminal call, so that turn is two requests."""


def script_fast_replies(sim_url: str) -> None:
    """Short replies, no streaming delay: the test measures the requests, not the pacing."""
    rules = [
        {"tool_result": ".", "text": "Listed.", "token_delay": 0},
        {"user": "list the files", "text": "Listing.", "token_delay": 0,
         "tool_calls": [{"name": "terminal", "input": {"command": "ls", "timeout": 30}}]},
        {"user": ".", "text": "Noted, thanks.", "token_delay": 0},
    ]
    httpx.post(f"{sim_url}/_sim/reset", json={},
               headers=sim_headers(sim_url), timeout=10).raise_for_status()
    httpx.post(f"{sim_url}/_sim/script", json={"rules": rules},
               headers=sim_headers(sim_url), timeout=10).raise_for_status()


def test_twenty_four_browser_turns_keep_the_prefix_and_read_the_cache(
        server, browser):
    url, sim_url, password = server
    script_fast_replies(sim_url)
    before = len(httpx.get(f"{sim_url}/_sim/requests",
                           headers=sim_headers(sim_url), timeout=10).json()["requests"])
    context, page = logged_in(browser, url, "demo", password)
    page.click("#new-session")
    page.wait_for_selector("#composer-text")
    for n in range(1, TURNS + 1):
        text = f"list the files, round {n}" if n % TOOL_EVERY == 0 else f"hello {n}"
        send_message(page, text)
        # One usage line per finished turn.
        page.wait_for_function(
            f"() => document.querySelectorAll('#transcript .usage').length >= {n}",
            timeout=20_000)
    assert page.locator("#transcript .tool-card").count() == TURNS // TOOL_EVERY
    context.close()

    recorded = httpx.get(f"{sim_url}/_sim/requests",
                         headers=sim_headers(sim_url), timeout=10).json()["requests"][before:]
    assert [r["status"] for r in recorded if r["status"] != 200] == []
    bodies = [r["body"] for r in recorded]
    assert len(bodies) == TURNS + TURNS // TOOL_EVERY
    user_texts = [b["messages"][-1]["content"][-1].get("text") for b in bodies
                  if b["messages"][-1]["content"][-1].get("type") == "text"]
    assert user_texts[0] == "hello 1" and user_texts[-1] == f"list the files, round {TURNS}"
    for previous, current in zip(bodies, bodies[1:]):
        assert holds(previous, current)
        assert earliest_message_breakpoint(current) >= 0
    reads = [r["usage"]["cache_read_input_tokens"] for r in recorded]
    assert reads[0] == 0 and all(read > 0 for read in reads[1:])
    # The reads grow with the conversation: each request reads at least what the one before
    # it read (the prefix only ever extends).
    assert all(b >= a for a, b in zip(reads, reads[1:]))
