"""A real browser watching child agents (issue 12 item 3): the user asks to delegate three
tasks, three child cards appear under the delegate call, update live (queued/running →
completed, iterations, tokens, cost), the header shows the children's total, the parent's
final answer arrives, and a card links to the child's read-only transcript."""

from __future__ import annotations

import httpx
import pytest

from tests.browser.conftest import sim_headers
from tests.browser.conftest import logged_in
from tests.browser.conftest import send_message

pytestmark = pytest.mark.browser

GOALS = ["alpha", "beta", "gamma"]


def script_delegation(sim_url: str) -> None:
    """Children stream a slow summary (~3 s each) so the cards are seen running."""
    summary = " ".join(f"part{n}" for n in range(40))
    rules = [*({"user": f"Goal:\\n{goal}\\n", "text": f"SUMMARY {goal}: {summary}",
                "token_delay": 0.07} for goal in GOALS),
             {"tool_result": "child agents? ended", "text": "PARENT FINAL: all three done."},
             {"user": "^delegate", "text": "Delegating.", "tool_calls": [
                 {"name": "delegate", "input": {"tasks": [{"goal": g} for g in GOALS]}}]}]
    httpx.post(f"{sim_url}/_sim/script", json={"rules": rules},
               headers=sim_headers(sim_url), timeout=10).raise_for_status()


def test_three_child_cards_update_live_and_link_to_read_only_transcripts(server, browser):
    url, sim_url, password = server
    script_delegation(sim_url)
    context, page = logged_in(browser, url, "demo", password)
    page.click("#new-session")
    page.wait_for_selector("#composer-text")
    send_message(page, "delegate three tasks")
    page.wait_for_selector(".child-cards .child-card >> nth=2", timeout=30_000)
    goals = page.locator(".child-card .child-goal").all_inner_texts()
    assert goals == GOALS
    seen = set()
    for _ in range(200):  # watch the statuses change without a reload
        seen |= set(page.eval_on_selector_all(".child-card",
                                              "els => els.map(e => e.dataset.status)"))
        if page.locator(".child-card[data-status=completed]").count() == 3:
            break
        page.wait_for_timeout(100)
    assert page.locator(".child-card[data-status=completed]").count() == 3, seen
    assert seen & {"queued", "running"}, seen  # seen before they ended: live, not a reload
    iterations = page.locator(".child-card .child-iterations").all_inner_texts()
    assert iterations == ["1", "1", "1"]
    # the noun follows the count: "1 iteration", never "1 iterations"
    metas = page.locator(".child-card .child-card-meta").all_inner_texts()
    assert all(" ".join(m.split()).startswith("1 iteration · ") for m in metas), metas
    tokens = [int(t.replace(",", "")) for t in
              page.locator(".child-card .child-tokens").all_inner_texts()]
    assert all(t > 0 for t in tokens)
    assert all(c.startswith("$") for c in page.locator(".child-card .child-cost").all_inner_texts())
    page.wait_for_selector("#transcript >> text=PARENT FINAL", timeout=30_000)
    assert page.is_visible("#children-cost")
    assert page.locator("#children-cost .children-cost-usd").inner_text().startswith("$")
    # One card per child, never duplicated by the socket re-rendering the tool card.
    assert page.locator(".child-card").count() == 3
    href = page.get_attribute(".child-card >> nth=0 >> .child-link", "href")
    page.goto(url + href)
    page.wait_for_selector("text=child agent of")
    assert page.locator("#composer").count() == 0
    assert "SUMMARY alpha" in page.locator("#transcript").inner_text()
    context.close()
