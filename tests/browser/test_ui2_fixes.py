"""A new user's findings, in a real browser (Debian's chromium via Playwright against daphne
in embedded mode; nothing is downloaded):

1. on a phone the session header of a session with child agents squeezed the title to
   0 px and pushed Rewind off-screen (the page 466 px wide at 390);
2. sending in a session deleted from another tab failed silently (a 404 in the console);
3. a decided approval card shown live was gone after a reload;
4. a 100-character schedule name pushed the other columns off-screen at 1280 px, and the
   "Always" rules table hid columns in a sideways scroll on a phone.
"""

from __future__ import annotations

import httpx
import pytest

from tests.browser.conftest import (click_new_session, embedded_server, logged_in,
                                    send_message, sim_headers, wait_for_chat)
from tests.browser.test_child_cards import script_delegation

pytestmark = pytest.mark.browser

WAIT_MS = 30_000
PHONE = {"width": 390, "height": 844}
SCHEDULE_NAME = ("Weekly dependency audit and summary of every open advisory for the "
                 "platform team's services")[:100]
SPACELESS_NAME = ("NightlyDependencyAuditAndSummary" * 4)[:100]
RULE_PATTERN = "sudo systemctl restart hermes-worker-pool-east --no-block --wait-for-drain"

SETUP = f"""
from django.core.management import call_command
call_command("migrate", interactive=False, verbosity=0)
call_command("demo_user")
from django.contrib.auth import get_user_model
from approvals.models import ApprovalRule
from schedules.models import Schedule
demo = get_user_model().objects.get(username="demo")
Schedule.objects.create(owner=demo, name={SCHEDULE_NAME!r}, prompt="audit",
                        kind="interval", interval_seconds=3600, target="new")
Schedule.objects.create(owner=demo, name={SPACELESS_NAME!r}, prompt="audit",
                        kind="interval", interval_seconds=7200, target="new")
ApprovalRule.objects.create(user=demo, tool_name="terminal", pattern={RULE_PATTERN!r},
                            created_by=demo)
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """daphne in embedded mode with the local backend (the sandbox would not ask about
    sudo), a schedule with a 100-character name and an "Always" rule; yields (url,
    sim_url, demo password)."""
    data = tmp_path_factory.mktemp("hermes-ui2")
    with embedded_server(data, env_extra={"HERMES_BACKEND": "local"}, setup=SETUP) as running:
        yield running


HEADER_GEOMETRY = """() => {
  const box = el => el.getBoundingClientRect();
  const head = document.querySelector('.chat-head');
  return {
    scrollWidth: document.scrollingElement.scrollWidth,
    innerWidth: window.innerWidth,
    title: box(document.getElementById('session-title')).width,
    controls: [...head.querySelectorAll('a, button, .children-cost:not([hidden]), .session-cost:not([hidden])')]
      .map(el => ({text: el.textContent.trim().slice(0, 30), left: box(el).left,
                   right: box(el).right, width: box(el).width})),
  };
}"""


def assert_header_fits(page, width: int) -> None:
    """Nothing scrolls sideways, the title has room, every header control is on screen."""
    page.set_viewport_size({"width": width, "height": 844})
    page.wait_for_timeout(100)
    g = page.evaluate(HEADER_GEOMETRY)
    assert g["scrollWidth"] <= g["innerWidth"], g
    assert g["title"] > 100, g
    for control in g["controls"]:
        assert control["width"] > 0 and control["left"] >= 0, (width, control)
        assert control["right"] <= g["innerWidth"], (width, control)


def test_phone_session_header_with_children_fits(server, browser):
    url, sim_url, password = server
    script_delegation(sim_url)
    context, page = logged_in(browser, url, "demo", password, viewport=PHONE)
    page.set_default_timeout(WAIT_MS)
    try:
        click_new_session(page)
        page.wait_for_selector("#composer-text")
        send_message(page, "delegate three tasks")
        page.wait_for_selector("#transcript >> text=PARENT FINAL", timeout=60_000)
        page.wait_for_selector("#turn-status[data-state=idle]")
        page.reload()
        wait_for_chat(page)
        assert page.is_visible("#children-cost")
        assert page.is_visible("#delete-session")
        for width in (390, 320):
            assert_header_fits(page, width)

        # A session without children: the title had ~40 px and wrapped a letter a line.
        page.set_viewport_size(PHONE)
        click_new_session(page)
        page.wait_for_selector("#composer-text")
        send_message(page, "hello there")
        page.wait_for_selector(".msg-assistant")
        page.wait_for_selector("#turn-status[data-state=idle]")
        for width in (390, 320):
            assert_header_fits(page, width)
    finally:
        context.close()


def test_sending_in_a_deleted_session_says_so_and_keeps_the_text(server, browser):
    url, _, password = server
    context, page = logged_in(browser, url, "demo", password)
    page.set_default_timeout(WAIT_MS)
    try:
        click_new_session(page)
        page.wait_for_selector("#composer-text")
        send_message(page, "hello")
        page.wait_for_selector(".msg-assistant")
        page.wait_for_selector("#turn-status[data-state=idle]")
        session_url = page.url

        # Deleted in another tab, then sent here.
        other = context.new_page()
        other.set_default_timeout(WAIT_MS)
        other.goto(session_url + "delete/")
        other.click("#delete-confirm")
        other.wait_for_url(f"{url}/")
        send_message(page, "still typing after the delete")
        page.wait_for_function(
            "() => !document.getElementById('send-error').hidden && document"
            ".getElementById('send-error').textContent.includes('no longer exists')")
        error = page.inner_text("#send-error")
        assert "no longer exists" in error, error
        assert page.input_value("#composer-text") == "still typing after the delete"
        link = page.locator("#send-error a")
        assert link.get_attribute("href") == "/"
        link.click()
        page.wait_for_url(f"{url}/")
    finally:
        context.close()


def test_a_send_that_never_reaches_the_server_says_so_and_keeps_the_text(server, browser):
    url, _, password = server
    context, page = logged_in(browser, url, "demo", password)
    page.set_default_timeout(WAIT_MS)
    try:
        click_new_session(page)
        page.wait_for_selector("#composer-text")
        wait_for_chat(page)
        page.route("**/messages/", lambda route: route.abort("failed"))  # the network is down
        send_message(page, "this one never leaves")
        page.wait_for_selector("#send-error:visible")
        assert "could not reach the server" in page.inner_text("#send-error").lower()
        assert page.input_value("#composer-text") == "this one never leaves"
        page.unroute("**/messages/")
        page.press("#composer-text", "Enter")  # back online: sent, and the error goes
        page.wait_for_selector("#send-error", state="hidden")
        page.wait_for_selector(".msg-user >> text=this one never leaves")
    finally:
        context.close()


APPROVAL_RULES = [
    {"tool_result": "exit code", "text": "Listed with sudo."},
    {"user": "^run sudo", "text": "Running it.",
     "tool_calls": [{"name": "terminal", "input": {"command": "sudo ls"}}]},
]


def card_text(page, card_id: str) -> str:
    return " ".join(page.locator(f"#{card_id}").inner_text().split())


def test_a_decided_approval_card_is_still_there_after_a_reload(server, browser):
    url, sim_url, password = server
    httpx.post(f"{sim_url}/_sim/script", json={"rules": APPROVAL_RULES},
               headers=sim_headers(sim_url), timeout=10).raise_for_status()
    context, page = logged_in(browser, url, "demo", password)
    page.set_default_timeout(WAIT_MS)
    try:
        click_new_session(page)
        page.wait_for_selector("#composer-text")
        send_message(page, "run sudo ls")
        card = page.wait_for_selector(".approval-card[data-state=pending]")
        card_id = card.get_attribute("id")
        page.click(f"#{card_id} button[value=once]")
        page.wait_for_selector(f"#{card_id}[data-state=approved]")
        page.wait_for_selector("#transcript >> text=Listed with sudo.")
        page.wait_for_selector("#turn-status[data-state=idle]")
        live = card_text(page, card_id)
        assert "Approved (once) by demo" in live
        live_order = page.eval_on_selector_all(
            "#transcript > *", "els => els.map(e => e.id || e.className)")

        page.reload()
        wait_for_chat(page)
        assert page.locator(f"#{card_id}").count() == 1
        assert card_text(page, card_id) == live
        reload_order = page.eval_on_selector_all(
            "#transcript > *", "els => els.map(e => e.id || e.className)")
        # Where the live page put it: after the reply that asked, before the next reply.
        assert reload_order.index(card_id) == live_order.index(card_id), (live_order,
                                                                          reload_order)
    finally:
        context.close()


COLUMNS_FIT = """([sel, cells]) => {
  const table = document.querySelector(sel), box = table.getBoundingClientRect();
  return {
    page: document.scrollingElement.scrollWidth, inner: window.innerWidth,
    table: [table.scrollWidth, table.clientWidth], left: box.left, right: box.right,
    cells: [...table.querySelectorAll(cells)].filter(c => c.offsetParent)
      .map(c => { const b = c.getBoundingClientRect();
                  return {text: c.textContent.trim().slice(0, 20), right: b.right,
                          height: b.height}; }),
  };
}"""


def test_long_schedule_names_keep_every_column_in_view(server, browser):
    url, _, password = server
    context, page = logged_in(browser, url, "demo", password,
                              viewport={"width": 1280, "height": 900})
    page.set_default_timeout(WAIT_MS)
    try:
        page.goto(f"{url}/schedules/")
        fit = page.evaluate(COLUMNS_FIT, ["#schedule-rows", "th, td"])
        assert fit["table"][0] <= fit["table"][1], fit  # no column hidden in a scroll
        for cell in fit["cells"]:
            assert cell["right"] <= min(fit["right"], fit["inner"]) + 1, (cell, fit)
            assert cell["height"] < 60, cell  # a name no longer makes a tower of a row
        titles = page.eval_on_selector_all("#schedule-rows tbody a[title]",
                                           "els => els.map(e => e.title)")
        assert {SCHEDULE_NAME, SPACELESS_NAME} <= set(titles)  # the whole name on hover

        page.set_viewport_size(PHONE)
        page.goto(f"{url}/schedules/")
        assert page.evaluate("() => document.scrollingElement.scrollWidth") <= 390
    finally:
        context.close()


def test_phone_always_rules_stack_instead_of_scrolling_sideways(server, browser):
    url, _, password = server
    context, page = logged_in(browser, url, "demo", password, viewport=PHONE)
    page.set_default_timeout(WAIT_MS)
    try:
        page.goto(f"{url}/approvals/rules/")
        # The header row is visually hidden there (read by screen readers), the cells are shown.
        fit = page.evaluate(COLUMNS_FIT, ["table.rules", "tbody td"])
        assert fit["page"] <= 390, fit
        assert fit["table"][0] <= fit["table"][1], fit  # stacked: nothing to scroll to
        for cell in fit["cells"]:
            assert cell["right"] <= 390, (cell, fit)
        revoke = page.locator("table.rules button", has_text="Revoke").bounding_box()
        assert revoke["x"] >= 0 and revoke["x"] + revoke["width"] <= 390
        # Each stacked value says which column it is.
        labels = page.eval_on_selector_all(
            "table.rules tbody td", "els => els.map(e => getComputedStyle(e, '::before').content)")
        assert '"Pattern"' in labels, labels
    finally:
        context.close()
