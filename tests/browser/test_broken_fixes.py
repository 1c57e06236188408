"""Issue 14, "Broken today" items 1–6, each in a real browser (Debian's chromium via
Playwright against daphne in embedded mode, the local backend so a risky command asks), at
desktop size and at 390×844 where layout matters:

1. sending from a tab left open after logout goes to the login page and, once logged in,
   back to the chat with the typed text restored;
2. a blank or 500-character rename shows its error, visibly (the Edit panel opens);
3. a team admin reading a member's session sees the member's name, not "You", on the page
   and live;
4. a tool card stopped by the user says "stopped"; one whose approval was cancelled says
   "cancelled" (live and after a reload);
5. rewind on an empty session says why nothing happened; a 100,000-character message is
   collapsed with "Show more";
6. tool card summaries say what the call does, per tool.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from tests.browser.conftest import sim_headers
from tests.browser.conftest import embedded_server, logged_in, send_message, wait_for_chat

pytestmark = pytest.mark.browser

MEMBER, MEMBER_PASSWORD = "mia", "mia-correct-horse-42"
LONG_TEXT = ("long line of text " * 6000)[:100_000]
LONG_TITLE = ("Quarterly planning notes for the infrastructure migration and the database "
              "upgrade review")
SETUP = f"""
from django.core.management import call_command
call_command("migrate", interactive=False, verbosity=0)
call_command("demo_user")
from django.contrib.auth import get_user_model
from accounts.models import Membership, Team
from sessions.models import Message
from sessions.services import session_create
User = get_user_model()
demo = User.objects.get(username="demo")
mia = User.objects.create_user(username={MEMBER!r}, password={MEMBER_PASSWORD!r})
Membership.objects.create(user=mia, team=Team.objects.get(name="demo"), role="member")
theirs = session_create(user=mia, title="Mia's work")
Message.objects.create(session=theirs, role="user", content="a question from mia")
Message.objects.create(session=theirs, role="assistant", content="an answer for mia")
session_create(user=demo, title="Empty one")
long = session_create(user=demo, title="Long one")
Message.objects.create(session=long, role="user", content={LONG_TEXT!r})
Message.objects.create(session=long, role="assistant", content="Noted. END-OF-REPLY")
session_create(user=demo, title="Rename me")
session_create(user=demo, title={LONG_TITLE!r})
from approvals.models import ApprovalRule
ApprovalRule.objects.create(user=demo, team=Team.objects.get(name="demo"), tool_name="terminal",
                            pattern="make deploy --environment staging", created_by=demo)
"""
RULES = [
    {"tool_result": "patched hello", "text": "All done with hello."},
    {"tool_result": "created hello", "text": "Now editing.",
     "tool_calls": [{"name": "patch", "input": {"path": "hello.txt", "old_string": "world",
                                                "new_string": "there"}},
                    {"name": "read_file", "input": {"path": "hello.txt"}},
                    {"name": "terminal", "input": {"command": "ls -la"}},
                    {"name": "search_files", "input": {"pattern": "foo", "path": "."}}]},
    {"user": "make hello", "text": "Creating it.",
     "tool_calls": [{"name": "write_file", "input": {"path": "hello.txt",
                                                     "content": "hello world\n"}}]},
    {"user": "sleep please", "text": "Sleeping.",
     "tool_calls": [{"name": "terminal", "input": {"command": "sleep 30", "timeout": 60}}]},
    {"user": "clean", "text": "I will remove the build directory.",
     "tool_calls": [{"name": "terminal", "input": {"command": "rm -rf build"}}]},
    {"user": "hello from mia", "text": "Hi Mia."},
]
WAIT_MS = 30_000
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    data = tmp_path_factory.mktemp("hermes-broken")
    with embedded_server(data, env_extra={"HERMES_BACKEND": "local"}, setup=SETUP) as running:
        url, sim_url, password = running
        httpx.post(f"{sim_url}/_sim/script", json={"rules": RULES},
                   headers=sim_headers(sim_url), timeout=10).raise_for_status()
        yield running


def open_session(page, url: str, title: str) -> str:
    page.goto(f"{url}/")
    page.click(f"a.session-title:text-is('{title}')")
    page.wait_for_selector("#transcript")
    return page.url


def new_chat(page) -> str:
    page.click("#new-session")
    page.wait_for_selector("#composer-text")
    return page.url


def no_horizontal_scroll(page) -> bool:
    return page.evaluate("() => document.scrollingElement.scrollWidth <= window.innerWidth")


# 1 ---------------------------------------------------------------------------------------
def test_send_after_logout_goes_to_login_and_keeps_the_text(server, browser):
    url, _sim, password = server
    context, page = logged_in(browser, url, "demo", password)
    page.set_default_timeout(WAIT_MS)
    try:
        chat_url = new_chat(page)
        chat_path = chat_url.removeprefix(url)
        other = context.new_page()  # the user logs out in another tab
        other.goto(f"{url}/")
        other.click("form[action='/logout/'] button")
        other.wait_for_url(re.compile(r".*/login/.*"))
        send_message(page, "my precious draft\nsecond line")
        page.wait_for_url(re.compile(r".*/login/\?next=.*"))
        assert page.locator("#id_username").is_visible()  # a whole page, not a fragment
        assert parse_qs(urlsplit(page.url).query)["next"] == [chat_path]
        page.fill("#id_username", "demo")
        page.fill("#id_password", password)
        page.click("button[type=submit]")
        page.wait_for_url(chat_url)
        assert page.input_value("#composer-text") == "my precious draft\nsecond line"
        assert page.locator("#transcript .msg-user").count() == 0  # nothing was sent
        # Sending it now works, and the draft is forgotten once sent.
        wait_for_chat(page)
        page.press("#composer-text", "Enter")
        page.wait_for_selector("#transcript .msg-user", timeout=WAIT_MS)
        page.reload()
        assert page.input_value("#composer-text") == ""
    finally:
        context.close()


# 2 ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("viewport", [None, PHONE], ids=["desktop", "phone"])
@pytest.mark.parametrize(("title", "error"), [
    ("", "A title cannot be empty."),
    ("x" * 500, "A title can be at most 200 characters."),
], ids=["blank", "500 chars"])
def test_a_refused_rename_shows_its_error(server, browser, viewport, title, error):
    url, _sim, password = server
    context, page = logged_in(browser, url, "demo", password, viewport=viewport)
    try:
        row = page.locator("li.session-row", has=page.locator("a.session-title",
                                                               has_text="Rename me"))
        row.locator("summary").click()
        field = row.locator("input[name=title]")
        field.evaluate("(el, value) => { el.value = value; }", title)
        row.locator("button:text-is('Rename')").click()
        message = page.locator(".rename-error")
        message.wait_for(state="visible")
        assert message.inner_text() == error
        box = message.bounding_box()
        size = page.viewport_size
        assert box["x"] >= 0 and box["x"] + box["width"] <= size["width"]
        assert page.locator("a.session-title", has_text="Rename me").count() == 1
        assert no_horizontal_scroll(page)
    finally:
        context.close()


# 3 ---------------------------------------------------------------------------------------
def test_team_admin_sees_the_members_name(server, browser):
    url, _sim, password = server
    admin, page = logged_in(browser, url, "demo", password)
    member, mia = logged_in(browser, url, MEMBER, MEMBER_PASSWORD)
    page.set_default_timeout(WAIT_MS)
    try:
        page.goto(f"{url}/")
        page.click("text=Mia's work")
        page.wait_for_selector("#transcript .msg-user")
        labels = page.locator("#transcript .msg-user .msg-meta").all_inner_texts()
        assert labels == [MEMBER]
        # Mia writes while the admin watches: the live message is labelled too.
        mia.goto(page.url)
        send_message(mia, "hello from mia")
        mia.wait_for_selector("#transcript >> text=Hi Mia.", timeout=WAIT_MS)
        page.wait_for_selector("#transcript >> text=Hi Mia.", timeout=WAIT_MS)
        labels = page.locator("#transcript .msg-user .msg-meta").all_inner_texts()
        assert labels == [MEMBER, MEMBER]
        assert mia.locator("#transcript .msg-user .msg-meta").all_inner_texts() == [
            "You", "You"]
    finally:
        admin.close()
        member.close()


# 4 ---------------------------------------------------------------------------------------
def test_stopped_tool_card_says_stopped(server, browser):
    url, _sim, password = server
    context, page = logged_in(browser, url, "demo", password)
    page.set_default_timeout(WAIT_MS)
    try:
        new_chat(page)
        send_message(page, "sleep please")
        card = page.locator(".tool-card").first
        card.wait_for()
        page.wait_for_selector(".tool-card[data-status=running]")
        page.click("#stop-button")
        page.wait_for_selector(".tool-card[data-status=stopped]")
        assert card.locator(".tool-status").inner_text() == "stopped"
        page.wait_for_selector("#turn-status[data-state=cancelled]")
        page.reload()
        assert page.locator(".tool-card .tool-status").inner_text() == "stopped"
    finally:
        context.close()


def test_cancelled_approval_says_cancelled(server, browser):
    url, _sim, password = server
    context, page = logged_in(browser, url, "demo", password)
    page.set_default_timeout(WAIT_MS)
    try:
        new_chat(page)
        send_message(page, "clean the build")
        page.wait_for_selector(".approval-card[data-state=pending]")
        page.wait_for_selector("#turn-status[data-state=awaiting_approval]")
        page.click("#stop-button")
        page.wait_for_selector(".tool-card[data-status=cancelled]")
        assert page.locator(".tool-card .tool-status").inner_text() == "cancelled"
        page.wait_for_selector(".approval-card[data-state=cancelled]")
        page.reload()
        assert page.locator(".tool-card .tool-status").inner_text() == "cancelled"
        assert "Not run: its approval was cancelled." in page.locator(
            ".tool-card .tool-output").text_content()
    finally:
        context.close()


# 5 ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("viewport", [None, PHONE], ids=["desktop", "phone"])
def test_rewind_on_an_empty_session_says_so(server, browser, viewport):
    url, _sim, password = server
    context, page = logged_in(browser, url, "demo", password, viewport=viewport)
    try:
        open_session(page, url, "Empty one")
        page.on("dialog", lambda d: d.accept())
        page.click(".chat-actions button:text-is('Rewind')")
        notice = page.locator("text=There is nothing to rewind.")
        notice.wait_for(state="visible")
        assert notice.is_visible()
        box, height = notice.bounding_box(), page.viewport_size["height"]
        assert 0 <= box["y"] and box["y"] + box["height"] <= height  # on screen, not scrolled by
    finally:
        context.close()


@pytest.mark.parametrize("viewport", [None, PHONE], ids=["desktop", "phone"])
def test_a_100k_message_is_collapsed_with_show_more(server, browser, viewport):
    url, _sim, password = server
    context, page = logged_in(browser, url, "demo", password, viewport=viewport)
    try:
        open_session(page, url, "Long one")
        body = page.locator("#transcript .msg-user .msg-body")
        collapsed = body.bounding_box()["height"]
        assert collapsed < 400
        button = page.locator("#transcript .show-more")
        assert button.is_visible() and button.inner_text().startswith("Show more")
        assert page.locator("#transcript >> text=END-OF-REPLY").is_visible()
        button.click()
        assert body.bounding_box()["height"] > 10 * collapsed
        assert button.inner_text() == "Show less"
        assert button.get_attribute("aria-expanded") == "true"
        button.click()
        assert body.bounding_box()["height"] == collapsed
        assert no_horizontal_scroll(page)
    finally:
        context.close()


# 6 ---------------------------------------------------------------------------------------
EXPECTED_SUMMARIES = ["create hello.txt: 1 line", "patch hello.txt: 1 replacement",
                      "read hello.txt (1 line)", "terminal: ls -la",
                      'search "foo" in .: 0 matches']


def test_tool_card_summaries_say_what_the_call_does(server, browser):
    url, _sim, password = server
    context, page = logged_in(browser, url, "demo", password)
    page.set_default_timeout(WAIT_MS)
    try:
        chat_url = new_chat(page)
        send_message(page, "make hello")
        page.wait_for_selector("#transcript >> text=All done with hello.")
        page.wait_for_selector("#turn-status[data-state=idle]")
        live = page.locator(".tool-card .tool-summary").all_inner_texts()
        assert live == EXPECTED_SUMMARIES
        page.reload()
        assert page.locator(".tool-card .tool-summary").all_inner_texts() == EXPECTED_SUMMARIES
        assert page.locator(".tool-card[data-status=done]").count() == 5
        phone = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True,
                                    storage_state=context.storage_state())
        mobile = phone.new_page()
        mobile.goto(chat_url)
        mobile.wait_for_selector(".tool-card")
        assert mobile.locator(".tool-card .tool-summary").all_inner_texts() == EXPECTED_SUMMARIES
        assert no_horizontal_scroll(mobile)
        phone.close()
    finally:
        context.close()


# A new user's phone findings (2026-12-02) -------------------------------------------------
def test_phone_pages_with_long_titles_and_rule_tables_fit_the_screen(server, browser):
    """The Schedules page's session picker lists full titles: its fieldset grew to the
    widest one and the page scrolled sideways (970 px on a 390 px phone). The "Always"
    rules table broke its headings letter by letter ("To ol", "P at te rn")."""
    url, _sim, password = server
    context, page = logged_in(browser, url, "demo", password, viewport=PHONE)
    try:
        page.goto(f"{url}/schedules/")
        assert page.locator("option", has_text=LONG_TITLE[:40]).count() >= 1
        assert no_horizontal_scroll(page)
        page.goto(f"{url}/approvals/rules/")
        heading = page.locator("table.rules th", has_text="Pattern").first
        assert heading.inner_text() == "Pattern"
        # One line: a heading broken into letters is several lines tall.
        line = page.evaluate("el => parseFloat(getComputedStyle(el).lineHeight)",
                             heading.element_handle())
        assert heading.bounding_box()["height"] < 2.5 * line
        assert no_horizontal_scroll(page)
    finally:
        context.close()
