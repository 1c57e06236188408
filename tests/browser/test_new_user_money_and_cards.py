"""A new user's findings on the session page, in a real browser (embedded mode, the
simulator): the header's cost follows a running turn (it changed only on a reload); a tool
card's title is readable on a 390 px phone (it was cut to one line); a turn stopped by a
budget and resumed reads the same live and after a reload (the usage line's place, the
budget warning kept). Every page here is watched for Content-Security-Policy violations:
there must be none (an inline style is one)."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest

from accounts.money import usd
from tests.browser.conftest import embedded_server, logged_in, send_message, wait_for_chat

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}
# The demo user administers team "demo": a $0.05/day team cap, and $0.048 spent today by
# another session, so the first call of a turn warns (80%) and a later one is stopped.
SETUP = """
from decimal import Decimal
from django.core.management import call_command
call_command("migrate", interactive=False, verbosity=0)
call_command("demo_user")
from django.contrib.auth import get_user_model
from accounts.models import Team
from accounts.services import budget_set
from sessions.models import UsageRecord
from sessions.services import session_create
demo, team = get_user_model().objects.get(username="demo"), Team.objects.get(name="demo")
budget_set(actor=demo, scope="team", team=team, period="day", limit="0.05")
UsageRecord.objects.create(session=session_create(user=demo), user=demo, team=team,
                           provider="simulator", model="hermes-simulator",
                           cost_usd=Decimal("0.048"))
"""
WATCH = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__csp.push(`${e.violatedDirective} ${e.sourceFile}:${e.lineNumber} ${e.sample}`);
});
"""
CSP_CONSOLE = re.compile(r"Content Security Policy|Refused to (apply|load|execute)", re.I)
DOLLARS = re.compile(r"^\$\d[\d,]*\.\d{2,4}$")
LONG_COMMAND = "echo the quick brown fox jumps over the lazy dog and keeps on running"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with embedded_server(tmp_path_factory.mktemp("hermes-new-user"), setup=SETUP) as running:
        yield running


def watched(page) -> list[str]:
    """Record CSP violations from the page's first byte (event listener and console)."""
    page.add_init_script(WATCH)
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text) if CSP_CONSOLE.search(m.text) else None)
    return console


def csp_seen(page, console) -> list[str]:
    return page.evaluate("() => window.__csp || []") + console


def new_session(page, url: str) -> None:
    """A new session page, by POSTing the list's form (no budget affects creating one)."""
    page.goto(f"{url}/")
    page.locator("#new-session").click()
    page.wait_for_url(re.compile(r"/sessions/\d+/$"))
    wait_for_chat(page)


def transcript_ids(page) -> list[str]:
    return page.eval_on_selector_all(
        "#transcript > [id]", "els => els.filter(e => e.offsetParent !== null || "
        "e.tagName === 'P').map(e => e.id)")


def test_the_header_cost_follows_the_turn_and_a_tool_title_wraps_on_a_phone(server, browser):
    url, _, password = server
    context, page = logged_in(browser, url, "demo", password, viewport=PHONE)
    console = watched(page)
    try:
        # a cap of $5 for this test (the other test sets its own)
        page.goto(f"{url}/spend/")
        page.click("nav.spend-scopes >> text=Team demo")
        page.fill("#budget-form input[name=limit]", "5")
        page.click("#budget-form button[type=submit]")
        page.wait_for_selector("#budgets >> text=$5.00 per day")
        new_session(page, url)
        assert page.locator("#session-cost").is_hidden()  # no call yet
        send_message(page, f"run {LONG_COMMAND}")
        page.wait_for_selector("#transcript .usage")
        page.wait_for_selector("#turn-status[data-state=idle]")
        live = page.inner_text("#session-cost")
        assert DOLLARS.match(live), live
        summary = page.locator("#transcript .tool-summary").first
        assert LONG_COMMAND in summary.inner_text()
        assert summary.get_attribute("title").endswith(LONG_COMMAND)
        # readable: the whole title is drawn (wrapped), not cut with an ellipsis
        assert summary.evaluate("e => e.scrollWidth <= e.clientWidth + 1")
        assert summary.evaluate("e => e.getBoundingClientRect().right <= window.innerWidth")
        page.reload()
        wait_for_chat(page)
        assert page.inner_text("#session-cost") == live  # what a reload reads
        assert csp_seen(page, console) == []
    finally:
        context.close()


def test_a_budget_stop_and_resume_read_the_same_live_and_after_a_reload(server, browser):
    url, _, password = server
    context, page = logged_in(browser, url, "demo", password)
    console = watched(page)
    admin = context.new_page()
    try:
        # A cap just above today's team spend (the other test's turn adds to SETUP's):
        # past 80% already, so the first call warns, and the next one is stopped.
        admin.goto(f"{url}/spend/")
        admin.click("nav.spend-scopes >> text=Team demo")
        spent = Decimal(admin.locator("[id^=budget-][id$=-spent]").first.inner_text()
                        .split()[0].lstrip("$").replace(",", ""))
        cap = f"{spent + Decimal('0.0005')}"  # below one call's cost (cache reads)
        admin.fill("#budget-form input[name=limit]", cap)
        admin.click("#budget-form button[type=submit]")
        admin.wait_for_selector(f"#budgets >> text={usd(cap)} per day")
        new_session(page, url)
        send_message(page, "list the files and read README.md")
        page.wait_for_selector("#budget-resume")
        warning = page.locator("#transcript .notice", has_text=f"budget of {usd(cap)}/day")
        assert warning.count() == 1
        # the admin raises the cap; the member resumes on the live page (no reload)
        admin.fill("#budget-form input[name=limit]", "5")
        admin.click("#budget-form button[type=submit]")
        admin.wait_for_selector("#budgets >> text=$5.00 per day")
        page.click("#budget-resume")
        page.wait_for_selector("#turn-status[data-state=idle]")
        page.wait_for_function(
            "() => document.querySelector('#transcript > :last-child').classList.contains('usage')")
        live = transcript_ids(page)
        live_cost = page.inner_text("#session-cost")
        page.reload()
        wait_for_chat(page)
        reloaded = transcript_ids(page)
        assert reloaded == live
        assert sum(1 for i in reloaded if i.startswith("usage-")) == 1
        assert reloaded[-1].startswith("usage-")  # after the resumed reply
        assert page.locator("#transcript .notice", has_text=f"budget of {usd(cap)}/day").count() == 1
        assert page.inner_text("#session-cost") == live_cost
        assert csp_seen(page, console) == []
    finally:
        context.close()
