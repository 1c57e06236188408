"""clarify and todo in a real browser (issue 13 "Done when": a clarify question round-trips
in the browser): Debian's chromium driven by Playwright, daphne serving the app in embedded
mode (SQLite, the in-process Celery worker, the provider simulator), as `make run` does.

The simulated model asks which colour a button should be (two choices); the question
arrives live in the chat with its choice buttons, the user clicks one, the turn resumes and
the model's reply arrives, all without a reload. Then it plans two tasks with the todo tool
and the side panel shows them live; a free-text answer to a second question works too.
"""

from __future__ import annotations

import httpx
import pytest

from tests.browser.conftest import sim_headers
from tests.browser.conftest import logged_in
from tests.browser.conftest import send_message

pytestmark = pytest.mark.browser

WAIT_MS = 20_000
RULES = [
    {"tool_result": "The user answered: Green", "text": "Going with green."},
    {"tool_result": "The user answered: teal", "text": "Going with your colour, teal."},
    {"tool_result": r"completed\)", "text": "Planned the work."},
    {"user": "style", "text": "One question first.",
     "tool_calls": [{"name": "clarify", "input": {
         "question": "Which colour should the button be?", "choices": ["Blue", "Green"]}}]},
    {"user": "border", "tool_calls": [{"name": "clarify", "input": {
        "question": "Which border colour?"}}]},
    {"user": "plan", "tool_calls": [{"name": "todo", "input": {"todos": [
        {"id": "1", "content": "Pick the colour", "status": "completed"},
        {"id": "2", "content": "Restyle the button", "status": "in_progress"}]}}]},
]


def test_a_clarify_question_round_trips_and_the_todo_panel_updates_live(server, browser):
    url, sim_url, password = server
    httpx.post(f"{sim_url}/_sim/script", json={"rules": RULES},
               headers=sim_headers(sim_url), timeout=10).raise_for_status()
    context, page = logged_in(browser, url, "demo", password)
    page.set_default_timeout(WAIT_MS)
    page.click("#new-session")
    page.wait_for_selector("#composer-text")
    page.evaluate("() => { window.__notReloaded = true; }")
    assert not page.locator("#todo-panel").is_visible()

    send_message(page, "style the button")
    card = page.locator(".clarify-card[data-state=pending]")
    card.wait_for()
    assert "Which colour should the button be?" in card.inner_text()
    page.wait_for_selector("#turn-status[data-state=awaiting_answer]")
    # The clarify call's tool card waits for the answer; it does not claim to be running.
    tool = page.locator(".tool-card").first
    page.wait_for_selector(".tool-card[data-status=waiting]")
    assert tool.locator(".tool-status").inner_text() == "waiting for your answer"
    page.reload()
    card.wait_for()
    assert tool.locator(".tool-status").inner_text() == "waiting for your answer"
    page.evaluate("() => { window.__notReloaded = true; }")
    card.locator("button.clarify-choice", has_text="Green").click()
    page.wait_for_selector(".clarify-card[data-state=answered]")
    page.wait_for_selector("#transcript >> text=Going with green.")
    page.wait_for_selector(".tool-card[data-status=done]")
    assert tool.locator(".tool-status").inner_text() == "done"
    page.wait_for_selector("#turn-status[data-state=idle]")

    send_message(page, "border please")
    second = page.locator(".clarify-card[data-state=pending]")
    second.wait_for()
    assert second.locator("button.clarify-choice").count() == 0
    second.locator("input[name=answer]").fill("teal")
    second.locator("button[type=submit]").click()
    page.wait_for_selector("#transcript >> text=Going with your colour, teal.")

    send_message(page, "plan it")
    page.wait_for_selector("#todo-panel:not([hidden]) .todo-item")
    panel = page.locator("#todo-panel")
    assert "1/2 done" in panel.inner_text()
    assert panel.locator(".todo-item[data-status=in_progress] .todo-content").inner_text() \
        == "Restyle the button"
    assert panel.locator(".todo-item[data-status=completed] .todo-content").inner_text() \
        == "Pick the colour"
    page.wait_for_selector("#transcript >> text=Planned the work.")
    assert page.evaluate("() => window.__notReloaded") is True  # all of it arrived live
    context.close()
