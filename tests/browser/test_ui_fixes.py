"""Fixes from a fresh user's walk through Hermes Web, checked in a real browser (Debian's
chromium via Playwright against daphne in embedded mode; nothing is downloaded):

- the chat header with a long title at 390×844 and at desktop width: the title wraps, the
  Export / Rewind actions stay on one line at the right (screenshots in HERMES_SHOTS_DIR
  when set, for a person to look at);
- a terminal command that exits non-zero shows "exit N" in the attention state, live and
  after a reload, while a zero exit stays "done";
- deciding on the review queue page updates the count, moves the card to Recent decisions
  and the header badge, without a reload;
- every page declares an icon, so the browser never asks for /favicon.ico;
- Stop (a running slow demo) and Resume (a budget stop with a long reason) stay one line
  tall at 375 px and 1280 px: the status text wraps, never the button's label.
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from tests.browser.conftest import click_new_session, embedded_server, logged_in, send_message

pytestmark = pytest.mark.browser

LONG_TITLE = ("Investigate why the nightly export of customer invoices to the accounting "
              "warehouse keeps timing out after the schema migration")
BUDGET_REASON = ("the team's daily budget of $0.05 is used up ($0.06 spent today); "
                 "a team admin can raise it on the team's page")
SETUP = f"""
from django.core.management import call_command
call_command("migrate", interactive=False, verbosity=0)
call_command("demo_user")
import json
from django.contrib.auth import get_user_model
from agents.messages import ToolCall
from agents.policy import Decision
from approvals.services import approval_request_create
from sessions.models import Turn
from sessions.services import session_create
demo = get_user_model().objects.get(username="demo")
session = session_create(user=demo, title={LONG_TITLE!r})
turn = Turn.objects.create(session=session, input_text="clean up",
                           status=Turn.Status.AWAITING_APPROVAL)
for n, command in enumerate(("rm -rf ./build", "rm -rf ./dist")):
    approval_request_create(
        session=session, turn=turn, workspace="/ws",
        pending=[(ToolCall(id=f"call_{{n}}", name="terminal",
                           arguments=json.dumps({{"command": command}})),
                  Decision(verdict="ask", rule="dangerous", reason="deletes a directory tree",
                           risk_class="destructive", normalized=command))])
blocked = session_create(user=demo, title="Budget stop")
Turn.objects.create(session=blocked, input_text="summarise the logs",
                    status=Turn.Status.BUDGET_BLOCKED, error={BUDGET_REASON!r})
"""
WAIT_MS = 30_000


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with embedded_server(tmp_path_factory.mktemp("hermes-ui"), setup=SETUP) as running:
        yield running


def shot(page, name: str) -> None:
    """Save a full-page screenshot when HERMES_SHOTS_DIR is set (for looking at)."""
    folder = os.environ.get("HERMES_SHOTS_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def header_boxes(page) -> dict:
    return page.evaluate("""() => {
        const box = (el) => { const r = el.getBoundingClientRect();
            return {left: r.left, right: r.right, top: r.top, bottom: r.bottom,
                    height: r.height, width: r.width}; };
        const head = document.querySelector('.chat-head');
        const exp = head.querySelector('a[href$="export.json"], a.link');
        const buttons = head.querySelectorAll('.chat-actions button.link');
        const rewind = buttons[buttons.length - 1];  // the last action (Regenerate, Rewind)
        return {head: box(head), title: box(document.getElementById('session-title')),
                exp: box(exp), rewind: box(rewind),
                last: box(head.querySelector('.chat-actions').lastElementChild),
                line: parseFloat(getComputedStyle(exp).lineHeight) || 24,
                scrollX: document.documentElement.scrollWidth - window.innerWidth};
    }""")


@pytest.mark.parametrize("name, viewport", [
    ("phone", {"width": 390, "height": 844}), ("desktop", {"width": 1280, "height": 800})])
def test_chat_header_keeps_actions_on_one_line_at_the_right(server, browser, name, viewport):
    url, _sim, password = server
    context, page = logged_in(browser, url, "demo", password, viewport=viewport)
    page.click(f"#session-rows >> text={LONG_TITLE[:30]}")  # the sidebar lists it too
    page.wait_for_selector("#session-title")
    b = header_boxes(page)
    shot(page, f"chat-header-{name}")
    assert b["scrollX"] <= 0
    # Each action is a single line, side by side, flush with the header's right edge.
    assert b["exp"]["height"] < 1.6 * b["line"] and b["rewind"]["height"] < 2.4 * b["line"]
    assert b["exp"]["width"] > 30
    assert b["rewind"]["left"] > b["exp"]["right"]
    assert b["rewind"]["right"] <= b["last"]["right"]
    assert abs(b["last"]["right"] - b["head"]["right"]) < 2  # the last action (Delete)
    assert b["title"]["left"] <= b["head"]["left"] + 1
    if name == "phone":
        # On a phone the title has the whole first row (squeezed beside the actions it had
        # ~40 px, a letter per line, and none at all beside the children's cost) and wraps
        # there; the actions take the row under it.
        assert b["title"]["width"] > 0.9 * b["head"]["width"]
        assert b["title"]["height"] > 1.5 * b["line"]
        assert b["title"]["bottom"] <= b["exp"]["top"] + 1
    else:
        # The title takes the rest of the row, left of the actions, and wraps there.
        assert b["title"]["right"] < b["exp"]["left"]
    context.close()


BUTTON_BOX = """(b) => { const r = b.getBoundingClientRect(), s = getComputedStyle(b);
    const px = (v) => parseFloat(v) || 0;
    const line = px(s.lineHeight) || 1.5 * px(s.fontSize);
    const oneLine = line + px(s.paddingTop) + px(s.paddingBottom) + px(s.borderTopWidth)
                    + px(s.borderBottomWidth);
    return {height: r.height, oneLine: Math.max(oneLine, px(s.minHeight)), left: r.left,
            right: r.right, text: b.textContent.trim(),
            scrollX: document.documentElement.scrollWidth - window.innerWidth}; }"""


def assert_one_line(page, selector: str) -> None:
    """The button is exactly one line tall (a label broken letter by letter is a column of
    letters: several lines) and fits in the viewport without a horizontal scroll."""
    box = page.locator(selector).evaluate(BUTTON_BOX)
    assert abs(box["height"] - box["oneLine"]) < 1, box
    assert 0 <= box["left"] and box["right"] <= page.viewport_size["width"], box
    assert box["scrollX"] <= 0, box


@pytest.mark.parametrize("name, viewport", [
    ("phone", {"width": 375, "height": 812}), ("desktop", {"width": 1280, "height": 800})])
def test_stop_and_resume_labels_never_break_inside_the_word(server, browser, name, viewport):
    """A user's finding: next to a long status line (the running turn's steer hint, a
    budget's reason) Stop and Resume shrank until their label broke letter by letter. The
    status text wraps instead; the buttons stay one line, at 375 px and at 1280 px."""
    url, _sim, password = server
    context, page = logged_in(browser, url, "demo", password, viewport=viewport)
    page.set_default_timeout(WAIT_MS)
    try:
        page.goto(url + "/")
        page.click("#session-rows >> text=Budget stop")
        page.wait_for_selector("#budget-resume")
        assert BUDGET_REASON in page.inner_text("#turn-status")
        assert_one_line(page, "#budget-resume")
        shot(page, f"budget-resume-{name}")

        click_new_session(page)
        page.wait_for_selector("#composer-text")
        send_message(page, "slow demo")
        page.wait_for_selector(".tool-card[data-status=running]")
        assert page.locator("#turn-status .steer-hint").is_visible()
        assert_one_line(page, "#stop-button")
        shot(page, f"stop-{name}")
        page.click("#stop-button")
        page.wait_for_selector("#turn-status[data-state=idle], #turn-status[data-state=cancelled]")
    finally:
        context.close()


def test_non_zero_exit_shows_attention_state_live_and_after_reload(server, browser):
    url, _sim, password = server
    context, page = logged_in(browser, url, "demo", password)
    page.set_default_timeout(WAIT_MS)
    page.click("#new-session")
    page.wait_for_selector("#composer-text")
    for n, (text, status, label) in enumerate([
            ("run ls no-such-dir", "failed", "exit 2"),
            ("run no-such-command-here", "failed", "exit 127"),
            ("run true", "done", "done")]):
        send_message(page, text)
        page.wait_for_function(
            "([i, s]) => { const c = document.querySelectorAll('.tool-card')[i];"
            " return c && c.dataset.status === s; }", arg=[n, status])
        page.wait_for_selector("#turn-status[data-state=idle]")
        assert page.locator(".tool-card .tool-status").nth(n).inner_text() == label
    shot(page, "tool-cards-live")
    page.reload()
    page.wait_for_selector(".tool-card >> nth=2")
    statuses = page.eval_on_selector_all(".tool-card", "cs => cs.map(c => [c.dataset.status,"
                                         " c.querySelector('.tool-status').textContent])")
    assert statuses == [["failed", "exit 2"], ["failed", "exit 127"], ["done", "done"]]
    context.close()


def test_deciding_on_the_queue_page_updates_it_without_reload(server, browser):
    url, _sim, password = server
    context, page = logged_in(browser, url, "demo", password, viewport={"width": 390,
                                                                          "height": 844})
    page.set_default_timeout(WAIT_MS)
    page.goto(f"{url}/approvals/")
    page.evaluate("() => { window.__notReloaded = true; }")
    assert page.inner_text("#pending-h") == "Pending (2)"
    assert page.inner_text("#approvals-badge") == "2"
    first = page.locator("#approval-queue .approval-card").first
    card_id = first.get_attribute("id")
    first.locator("input[name=reason]").fill("not today")
    first.locator("button[name=choice][value=deny]").click()
    page.wait_for_selector("#pending-h >> text=Pending (1)")
    recent = page.locator("section[aria-labelledby=recent-h]")
    assert recent.locator(f"#{card_id}").get_attribute("data-state") == "denied"
    assert "not today" in recent.inner_text()
    assert page.locator("#no-recent").count() == 0
    assert page.locator(f"section[aria-labelledby=pending-h] #{card_id}").count() == 0
    assert page.inner_text("#approvals-badge") == "1"
    assert page.evaluate("() => window.__notReloaded === true")
    shot(page, "approvals-after-deny")
    context.close()


def test_pages_declare_an_icon_and_never_request_favicon_ico(server, browser):
    url, _sim, password = server
    context = browser.new_context()
    page = context.new_page()
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    page.goto(f"{url}/login/")
    page.wait_for_load_state("networkidle")
    icon = page.get_attribute("link[rel=icon]", "href")
    assert icon and icon.endswith("favicon.svg")
    response = httpx.get(url + icon, timeout=10)
    assert response.status_code == 200 and response.text.lstrip().startswith("<svg")
    assert not [u for u in asked if u.endswith("/favicon.ico")]
    context.close()
