"""Testers' findings on the chat page, checked in a real browser (Debian's chromium via
Playwright against daphne in embedded mode; nothing is downloaded):

- the composer's placeholder was cut off on a phone (375×667, 320×568): it is now short
  ("Message Hermes") and the keys are told in a hint under the box, which wraps, is read
  with the box by screen readers and never runs past the screen;
- three "New session" buttons showed at once: one shows per screen (the sidebar's on
  desktop, the header's where the sidebar is hidden, the session list's own there), it is
  the only one in the tab order and the accessibility tree, and Alt+N presses it;
- Enter pressed before the deferred chat.js had run added a newline and sent nothing: the
  key is now bound from the first paint (static/composer.js), the box shows exactly what was
  typed, and the message (or, with Alt+Enter, the correction) goes out once the scripts are
  ready, with no Content-Security-Policy violation.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from tests.browser.conftest import (
    NEW_SESSION_BUTTONS, logged_in, send_message, wait_for_chat)

pytestmark = pytest.mark.browser

WAIT_MS = 30_000
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 375, "height": 667}
SMALL_PHONE = {"width": 320, "height": 568}

NEW_NAME = re.compile(r"^(\+ )?New session$")  # "+ New session" (header), "New session"
WATCH_VIOLATIONS = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__csp.push(e.violatedDirective + ' ' + e.blockedURI);
});
"""


def shot(page, name: str) -> None:
    """A screenshot for a person to look at, when HERMES_SHOTS_DIR is set."""
    folder = os.environ.get("HERMES_SHOTS_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"polish-{name}.png"))


# --- 1. the placeholder fits ---------------------------------------------------------------

@pytest.mark.parametrize("viewport", [PHONE, SMALL_PHONE, DESKTOP],
                         ids=["375x667", "320x568", "desktop"])
def test_composer_placeholder_fits_and_the_keys_stay_readable(server, browser, viewport):
    url, _, password = server
    context, page = logged_in(browser, url, "demo", password, viewport=viewport)
    page.set_default_timeout(WAIT_MS)
    try:
        page.click("#new-session")  # the session list's own button
        page.wait_for_selector("#composer-text")
        wait_for_chat(page)
        # The placeholder laid out as the box's text: it must fit inside the box, no line
        # hidden below the two rows and nothing past the right edge.
        fit = page.evaluate("""() => {
            const t = document.getElementById('composer-text');
            const shown = t.placeholder;
            t.value = shown;  // no input event: the draft store is untouched
            const r = {placeholder: shown, scrollH: t.scrollHeight, clientH: t.clientHeight,
                       scrollW: t.scrollWidth, clientW: t.clientWidth};
            t.value = '';
            return r;
        }""")
        assert fit["placeholder"].startswith("Message Hermes"), fit
        assert fit["scrollH"] <= fit["clientH"] and fit["scrollW"] <= fit["clientW"], fit

        # The keys are still told, in full, under the box, and read with it.
        hint = page.locator("#composer-hint")
        assert hint.is_visible()
        text = " ".join(hint.inner_text().split())
        for phrase in ("Enter sends", "Shift+Enter adds a line", "Alt+Enter steers"):
            assert phrase in text, text
        assert "composer-hint" in page.get_attribute("#composer-text", "aria-describedby").split()
        box = hint.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"], box
        assert hint.evaluate("(h) => h.scrollWidth <= h.clientWidth"), "the hint is cut off"
        assert page.evaluate("document.scrollingElement.scrollWidth") <= viewport["width"]
        shot(page, f"composer-{viewport['width']}")
    finally:
        context.close()


# --- 2. one New session button per screen ------------------------------------------------

def shown_new_buttons(page) -> list[str]:
    return [b for b in NEW_SESSION_BUTTONS if page.locator(b).count() and page.is_visible(b)]


def tab_stops(page, limit: int = 60) -> list[str]:
    """The ids focused by pressing Tab from the top of the page (up to ``limit`` stops)."""
    page.evaluate("() => { document.activeElement && document.activeElement.blur();"
                  " window.scrollTo(0, 0); }")
    stops = []
    for _ in range(limit):
        page.keyboard.press("Tab")
        stops.append(page.evaluate("document.activeElement.id || document.activeElement.tagName"))
    return stops


def assert_one_new_button(page, expected: str, viewport: dict) -> None:
    assert shown_new_buttons(page) == [expected]
    # Screen readers get the same single button (hidden ones leave the accessibility tree).
    assert page.get_by_role("button", name=NEW_NAME).count() == 1
    box = page.locator(expected).bounding_box()
    assert box and box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"], box
    assert box["y"] >= 0 and box["y"] + box["height"] <= viewport["height"], box
    # Keyboard users reach it; the hidden ones are not tab stops.
    stops = tab_stops(page)
    assert expected.lstrip("#") in stops, stops
    hidden = {b.lstrip("#") for b in NEW_SESSION_BUTTONS} - {expected.lstrip("#")}
    assert not hidden & set(stops), stops


def alt_n_starts_a_session(page, url: str) -> None:
    """Alt+N presses the New session button shown: a session page loads (from an empty
    session that is the same one again: "New session" reuses an untouched empty session
    instead of piling up rows, sessions/services.py session_create_or_reuse)."""
    with page.expect_navigation():
        page.keyboard.press("Alt+n")
    assert "/sessions/" in page.url
    page.wait_for_selector("#composer-text")
    wait_for_chat(page)


def test_one_new_session_button_on_desktop(server, browser):
    url, _, password = server
    context, page = logged_in(browser, url, "demo", password, viewport=DESKTOP)
    page.set_default_timeout(WAIT_MS)
    try:
        # The session list: its own button (with the provider choice), nothing else.
        wait_for_ready(page)
        assert_one_new_button(page, "#new-session", DESKTOP)
        alt_n_starts_a_session(page, url)
        # The chat page: the sidebar's.
        assert_one_new_button(page, "#sidebar-new-session", DESKTOP)
        shot(page, "new-desktop")
        alt_n_starts_a_session(page, url)
        # Sidebar collapsed: the header's takes over.
        page.click("#sidebar-toggle")
        assert not page.is_visible("#sidebar")
        assert_one_new_button(page, "#header-new-session", DESKTOP)
        shot(page, "new-desktop-collapsed")
        alt_n_starts_a_session(page, url)
        page.click("#header-new-session")
        page.wait_for_selector("#composer-text")
    finally:
        context.close()


def test_one_new_session_button_on_a_phone(server, browser):
    url, _, password = server
    context, page = logged_in(browser, url, "demo", password, viewport=PHONE)
    page.set_default_timeout(WAIT_MS)
    try:
        wait_for_ready(page)
        assert_one_new_button(page, "#new-session", PHONE)
        page.click("#new-session")
        page.wait_for_selector("#composer-text")
        wait_for_chat(page)
        # The chat page: the header's ("+ New"); the drawer's shows only when it is open,
        # above the header's.
        assert_one_new_button(page, "#header-new-session", PHONE)
        shot(page, "new-phone")
        page.click("#sidebar-toggle")
        page.wait_for_function("() => document.getElementById('sidebar').getBoundingClientRect().left >= 0")
        assert shown_new_buttons(page) == ["#sidebar-new-session"]
        assert page.get_by_role("button", name=NEW_NAME).count() == 1
        shot(page, "new-phone-drawer")
        page.keyboard.press("Escape")
        page.wait_for_function("() => !document.body.classList.contains('drawer-open')")
        assert shown_new_buttons(page) == ["#header-new-session"]
        alt_n_starts_a_session(page, url)
        page.click("#header-new-session")
        page.wait_for_selector("#composer-text")
    finally:
        context.close()


def wait_for_ready(page) -> None:
    page.wait_for_function("() => document.readyState === 'complete'")


# --- 3. Enter before chat.js ----------------------------------------------------------------

def held_page(context, session_url: str):
    """Open ``session_url`` with static/chat.js held back (as on a slow network), so the
    deferred scripts have not run; returns (page, release, console errors)."""
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    page.add_init_script(WATCH_VIOLATIONS)
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    held = []

    def hold_first(route):
        if held:
            route.continue_()
        else:
            held.append(route)

    page.route("**/static/chat.js*", hold_first)
    page.goto(session_url, wait_until="commit")
    page.wait_for_selector("#composer-text")
    deadline = time.monotonic() + 10
    while not held and time.monotonic() < deadline:
        page.wait_for_timeout(50)
    assert held, "chat.js was never requested"
    assert page.evaluate("() => typeof window.hermesChat") == "undefined"

    def release():
        held[0].continue_()
        wait_for_chat(page)

    return page, release, errors


def new_session_held(context, page):
    """Start a session from the list's own button, then reopen it with chat.js held back:
    (page, release, console errors) as ``held_page`` gives them."""
    page.set_default_timeout(WAIT_MS)
    page.click("#new-session")  # the session list's own button
    page.wait_for_selector("#composer-text")
    session_url = page.url
    page.close()
    return held_page(context, session_url)


def test_enter_before_the_chat_script_loads_sends_the_message_once(server, browser):
    url, _, password = server
    context, page = logged_in(browser, url, "demo", password, viewport=DESKTOP)
    try:
        page, release, errors = new_session_held(context, page)
        box = page.locator("#composer-text")
        box.click()
        page.keyboard.press("Enter")  # a blank box: nothing to send, and no newline either
        assert box.input_value() == ""
        page.keyboard.type("first line")
        page.keyboard.press("Shift+Enter")  # still adds a line before the scripts run
        page.keyboard.type("second line")
        page.keyboard.press("Enter")
        # Not a stray newline: the box holds what was typed, read-only until it is sent.
        assert box.input_value() == "first line\nsecond line"
        assert page.get_attribute("#composer", "aria-busy") == "true"
        assert page.evaluate("() => typeof window.hermesChat") == "undefined"
        with page.expect_request(lambda r: r.method == "POST" and r.url.endswith("/messages/")):
            release()
        page.wait_for_selector("#transcript .msg-assistant", timeout=WAIT_MS)
        page.wait_for_selector("#turn-status[data-state=idle]", timeout=WAIT_MS)
        users = page.locator("#transcript .msg-user .msg-body")
        assert users.count() == 1
        assert users.first.inner_text() == "first line\nsecond line"
        assert box.input_value() == "" and not box.evaluate("(t) => t.readOnly")
        assert page.get_attribute("#composer", "aria-busy") is None
        # After a reload the stored message is the same: no newline was sent either.
        page.reload()
        wait_for_chat(page)
        assert page.locator("#transcript .msg-user .msg-body").all_inner_texts() == [
            "first line\nsecond line"]
        # Enter after the scripts ran still sends (one handler, one message).
        send_message(page, "third")
        page.wait_for_function(
            "() => document.querySelectorAll('#transcript .msg-user').length === 2")
        page.wait_for_selector("#turn-status[data-state=idle]", timeout=WAIT_MS)
        page.wait_for_timeout(500)
        assert page.locator("#transcript .msg-user").count() == 2
        assert page.evaluate("() => window.__csp") == []
        assert [e for e in errors if "Content Security Policy" in e or "Refused" in e] == []
        assert errors == [], errors
    finally:
        context.close()


def test_alt_enter_before_the_scripts_load_sends_a_correction(server, browser):
    url, _, password = server
    context, page = logged_in(browser, url, "demo", password, viewport=PHONE)
    try:
        page, release, errors = new_session_held(context, page)
        box = page.locator("#composer-text")
        box.click()
        page.keyboard.type("a correction")
        page.keyboard.press("Alt+Enter")
        assert box.input_value() == "a correction"
        with page.expect_request(lambda r: r.method == "POST" and r.url.endswith("/steer/")):
            release()
        page.wait_for_function("() => document.getElementById('composer-text').value === ''")
        page.wait_for_selector("#transcript .msg-user >> text=a correction")
        page.wait_for_selector("#turn-status[data-state=idle]", timeout=WAIT_MS)
        assert page.locator("#transcript .msg-user").count() == 1
        assert page.evaluate("() => window.__csp") == []
        assert errors == [], errors
    finally:
        context.close()
