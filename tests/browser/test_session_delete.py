"""Deleting a session and pressing "New session" in a real browser (Debian's chromium via
Playwright against daphne in embedded mode; nothing is downloaded):

- "New session" pressed on an empty session's page reopens that session, not a new row;
- Delete on the session page leads to a confirmation page (no script dialog); a double
  click on its button deletes once and lands on the session list with a clear message,
  never a 404 page; another tab still open on the session says it is no longer available;
- Delete… from the session list (under Edit) leads to the same page.
"""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import (click_new_session, logged_in, send_message,
                                    wait_for_chat)

pytestmark = pytest.mark.browser

WAIT_MS = 30_000


def new_session(page) -> str:
    click_new_session(page)
    page.wait_for_selector("#composer-text")
    wait_for_chat(page)
    return page.url


def test_new_session_reuses_the_empty_one_and_delete_confirms_on_a_page(server, browser):
    url, _, password = server
    context, page = logged_in(browser, url, "demo", password)
    page.set_default_timeout(WAIT_MS)
    try:
        first = new_session(page)
        assert new_session(page) == first  # still empty: the same session again
        send_message(page, "hello")
        page.wait_for_selector(".msg-assistant", timeout=WAIT_MS)
        page.wait_for_selector("#turn-status[data-state=idle]", timeout=WAIT_MS)
        wait_for_chat(page)

        # A second tab on the same session, to see the delete from there.
        other = context.new_page()
        other.set_default_timeout(WAIT_MS)
        other.goto(first)
        wait_for_chat(other)

        page.click("#delete-session")
        page.wait_for_selector("#delete-confirm")
        assert "cannot be undone" in page.inner_text("main")
        assert re.search(r"/sessions/\d+/delete/$", page.url)
        page.dblclick("#delete-confirm")
        page.wait_for_url(f"{url}/")
        page.wait_for_selector(".flash")
        flash = page.inner_text(".flash")
        assert "Deleted “hello”" in flash or "already deleted" in flash
        assert page.locator(f'a[href="{first[len(url):]}"]').count() == 0
        assert page.goto(first).status == 404

        other.wait_for_function(
            "() => !document.getElementById('banner').hidden", timeout=WAIT_MS)
        assert "not available" in other.inner_text("#banner")

        # From the list: Edit → Delete… → the same confirmation page.
        page.goto(f"{url}/")
        second = new_session(page)
        send_message(page, "second chat")
        # The reply first: right after the send the status can still read idle while the
        # turn is queued, and a queued turn rightly refuses the delete (services mode).
        page.wait_for_selector(".msg-assistant", timeout=WAIT_MS)
        page.wait_for_selector("#turn-status[data-state=idle]", timeout=WAIT_MS)
        page.goto(f"{url}/")
        row = page.locator(f'#session-{second.rstrip("/").rsplit("/", 1)[1]}')
        row.locator("summary").click()
        row.locator(".delete-link").click()
        page.wait_for_selector("#delete-confirm")
        page.click("#delete-confirm")
        page.wait_for_url(f"{url}/")
        assert "Deleted “second chat”" in page.inner_text(".flash")
    finally:
        context.close()
