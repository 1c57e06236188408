"""Steering a running turn from a real browser (issue 12 item 4): chromium, daphne in embedded
mode, the in-process worker and the provider simulator, as `make run` starts them.

The model plans two commands; while the first runs, the user types a correction and presses
Alt+Enter. The correction shows at once as a queued correction, lands between the two
calls (the second is shown as not run), appears in the transcript as the user's correction,
and the model's next answer obeys it.
"""

from __future__ import annotations

import httpx
import pytest

from tests.browser.conftest import sim_headers
from tests.browser.conftest import logged_in
from tests.browser.conftest import send_message

pytestmark = pytest.mark.browser

CORRECTION = "Stop after the first step, do not write b.txt."


def script(sim_url: str) -> None:
    rules = [
        {"user": "stop after the first step", "text": "Understood: I stopped after step one."},
        {"user": "two steps", "text": "Two steps: wait, then write b.txt.",
         "tool_calls": [{"name": "terminal", "input": {"command": "sleep 4; echo step one"}},
                        {"name": "terminal", "input": {"command": "echo two > b.txt"}}]},
    ]
    httpx.post(f"{sim_url}/_sim/script", json={"rules": rules},
               headers=sim_headers(sim_url), timeout=10).raise_for_status()


def test_alt_enter_steers_the_running_turn_between_two_tool_calls(server, browser):
    url, sim_url, password = server
    script(sim_url)
    context, page = logged_in(browser, url, "demo", password)
    page.click("#new-session")
    page.wait_for_selector("#composer-text")
    assert page.is_visible("#steer-button")

    send_message(page, "do the two steps")  # plain Enter: an ordinary message
    page.wait_for_selector(".tool-card[data-status=running]", timeout=30_000)

    page.fill("#composer-text", CORRECTION)
    page.press("#composer-text", "Alt+Enter")
    page.wait_for_selector(".queued-steer", timeout=10_000)
    # The queued bubble can arrive over the socket before the POST's answer clears the box.
    page.wait_for_function("() => document.getElementById('composer-text').value === ''",
                           timeout=10_000)
    assert page.get_attribute("#turn-status", "data-state") == "running"

    page.wait_for_function("() => document.getElementById('transcript').innerText"
                           ".includes('Understood: I stopped after step one.')", timeout=30_000)
    cards = page.locator(".tool-card")
    assert cards.count() == 2
    assert cards.nth(0).get_attribute("data-status") == "done"
    assert cards.nth(1).locator(".tool-status").inner_text() == "not run: steered"
    steered = page.locator(".msg-user.msg-kind-steer")
    assert steered.count() == 1 and CORRECTION in steered.inner_text()
    assert "correction, sent while the turn ran" in steered.inner_text()
    assert page.locator(".queued-steer").count() == 0  # the queued bubble was replaced
    # Only one turn ran: the correction went into it, not behind it.
    page.wait_for_selector("#turn-status[data-state=idle]", timeout=10_000)
    assert page.locator(".usage").count() == 1

    page.reload()  # the same picture from the stored rows
    page.wait_for_selector(".msg-user.msg-kind-steer")
    assert page.locator(".tool-card").nth(1).locator(".tool-status").inner_text() == (
        "not run: steered")
    assert page.locator(".queued-steer").count() == 0
    context.close()
