"""/spend/ in a real browser (issue 9): Debian's chromium driven by Playwright against daphne
in embedded mode (what `make run` starts). A member chats on a phone-sized viewport and sees
the turn's dollars in the chat, then on /spend/ (the pygal chart drawn, nothing wider than
the screen, readable in dark mode); the team admin (the demo user) sees the member in the
team's members table and sets a budget from the page, a bad one refused with a form error."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import embedded_server
from tests.browser.conftest import logged_in as login_context
from tests.browser.conftest import send_message

pytestmark = pytest.mark.browser

MEMBER, MEMBER_PASSWORD = "mia", "mia-correct-horse-42"
PHONE = {"width": 390, "height": 844}
SETUP = f"""
from django.core.management import call_command
call_command("migrate", interactive=False, verbosity=0)
call_command("demo_user")
from django.contrib.auth import get_user_model
from accounts.models import Membership, Team
user = get_user_model().objects.create_user(username={MEMBER!r}, password={MEMBER_PASSWORD!r})
Membership.objects.create(user=user, team=Team.objects.get(name="demo"), role="member")
"""
DOLLARS = re.compile(r"\$\d+\.\d{2,4}")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with embedded_server(tmp_path_factory.mktemp("hermes-spend"), setup=SETUP) as running:
        yield running


def no_horizontal_overflow(page) -> bool:
    return page.evaluate("() => document.scrollingElement.scrollWidth <= window.innerWidth + 1")


def test_member_sees_dollars_in_chat_and_on_spend_on_a_phone(server, browser):
    url, _, _ = server
    context, page = login_context(browser, url, MEMBER, MEMBER_PASSWORD, viewport=PHONE)
    try:
        page.click("#new-session")
        page.wait_for_selector("#composer-text")
        send_message(page, "list the files and read README.md")
        # the usage line arrives with turn.finished over the websocket (slow on a busy host)
        usage = page.wait_for_selector(".usage .cost", timeout=90_000)
        assert DOLLARS.search(usage.inner_text()), usage.inner_text()
        page.goto(f"{url}/spend/")
        chart = page.wait_for_selector("#spend-chart svg.spend-chart")
        assert chart.is_visible()
        assert page.locator("#spend-chart svg g.bar").count() == 30  # one per day
        drawn = page.evaluate("() => [...document.querySelectorAll('#spend-chart g.bar rect')]"
                              ".filter(r => r.getBBox().height > 0).length")
        assert drawn == 1  # only today has spend
        today = page.inner_text("#spend-today")
        assert DOLLARS.fullmatch(today) and today != "$0.00", today
        box = chart.bounding_box()
        assert box["width"] <= PHONE["width"] and box["height"] > 100
        assert no_horizontal_overflow(page)
        assert page.locator("#by-session tbody tr").count() == 1
        page.screenshot(path="/tmp/spend-phone.png", full_page=True)
    finally:
        context.close()


def test_spend_chart_is_readable_in_dark_mode(server, browser):
    url, _, _ = server
    context, page = login_context(browser, url, MEMBER, MEMBER_PASSWORD, viewport=PHONE)
    try:
        page.emulate_media(color_scheme="dark")
        page.goto(f"{url}/spend/")
        page.wait_for_selector("#spend-chart svg")
        colours = page.evaluate("""() => {
            const label = document.querySelector('#spend-chart svg text');
            const box = document.querySelector('#spend-chart');
            return {text: getComputedStyle(label).fill,
                    body: getComputedStyle(document.body).color,
                    bg: getComputedStyle(box).backgroundColor};
        }""")
        # axis labels take the page's (light-on-dark) text colour, on the dark card
        assert colours["text"] == colours["body"], colours
        light = [int(v) for v in re.findall(r"\d+", colours["text"])[:3]]
        dark = [int(v) for v in re.findall(r"\d+", colours["bg"])[:3]]
        assert sum(light) > 500 and sum(dark) < 200, colours
    finally:
        context.close()


def test_team_admin_sees_members_and_sets_a_budget(server, browser):
    url, _, password = server
    context, page = login_context(browser, url, "demo", password, viewport=PHONE)
    try:
        page.goto(f"{url}/spend/")
        page.click("nav.spend-scopes >> text=Team demo")
        page.wait_for_selector("#members-table")
        assert page.locator("#members-table >> text=mia").count() == 1
        assert DOLLARS.search(page.inner_text("#members-table"))
        assert page.locator("#spend-chart svg").count() == 1
        assert no_horizontal_overflow(page)
        page.fill("#budget-form input[name=limit]", "-1")
        page.click("#budget-form button[type=submit]")
        error = page.wait_for_selector("#budget-error")
        assert "negative" in error.inner_text()
        page.fill("#budget-form input[name=limit]", "0.05")
        page.click("#budget-form button[type=submit]")
        page.wait_for_selector("#budgets >> text=$0.05 per day")
        csv_link = page.get_attribute("#members-csv", "href")
        assert "/members.csv" in csv_link
    finally:
        context.close()
