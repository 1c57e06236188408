"""The interface a person lives in (issue 14), in Debian's chromium against the real server
(embedded mode: daphne, the in-process worker, the provider simulator):

- navigation: the sidebar (new, search, pin, recent), collapsing it, Ctrl+K, the "?" list,
  the Admin link for staff; on a 390×844 phone one header row and a drawer;
- edit a past message and re-run, regenerate, fork at a message; Esc stops a turn;
- the context gauge and its breakdown, "compact now"; the model switch;
- the workspace panel: tree, highlighted preview, upload (and the cap's error), refreshed
  when a tool writes a file.

Screenshots of the main pages go to var/screenshots/ (gitignored) for a person to look at.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.browser.conftest import sim_headers
from tests.browser.conftest import (
    ROOT, click_new_session, embedded_server, logged_in, send_message)

pytestmark = pytest.mark.browser

SHOTS = ROOT / "var" / "screenshots"
WAIT = 30_000
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1400, "height": 900}
RULES = [
    {"tool_result": "notes.md", "text": "Wrote notes.md."},  # first: the user rule matches again
    {"user": "make notes", "text": "Writing notes.md.",
     "tool_calls": [{"name": "write_file", "input": {"path": "notes.md",
                                                     "content": "# Notes\n\nwritten by a tool\n"}}]},
    {"user": "sleep please", "text": "Sleeping.",
     "tool_calls": [{"name": "terminal", "input": {"command": "sleep 30", "timeout": 60}}]},
    {"user": "first question", "text": "First answer."},
    {"user": "clean up", "text": "Removing build.",
     "tool_calls": [{"name": "terminal", "input": {"command": "rm -rf build"}}]},
    {"user": "edited question", "text": "Answer to the edited question."},
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    data = tmp_path_factory.mktemp("hermes-interface")
    with embedded_server(data, env_extra={"HERMES_UPLOAD_MAX_BYTES": "2000",
                                          "HERMES_BACKEND": "local"}) as running:
        httpx.post(f"{running[1]}/_sim/script", json={"rules": RULES},
                   headers=sim_headers(running[1]), timeout=10).raise_for_status()
        yield running


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=False)


def new_session(page, url: str) -> str:
    click_new_session(page)
    page.wait_for_selector("#composer-text")
    return page.url


def send(page, text: str) -> None:
    send_message(page, text)
    page.wait_for_selector("#turn-status[data-state=running], #turn-status[data-state=queued]",
                           timeout=WAIT)
    page.wait_for_selector("#turn-status[data-state=idle]", timeout=WAIT)


def test_sidebar_search_pin_collapse_shortcuts_and_admin_link(server, browser):
    url, _, password = server
    context, page = logged_in(browser, url, "demo", password, viewport=DESKTOP)
    chat_url = new_session(page, url)
    send(page, "first question")
    # Live, before any reload: the title the first message gave reaches the sidebar too
    # (a new user's finding: it said "New session" until a reload).
    page.wait_for_function(
        "document.querySelector('#sidebar-recent .sidebar-item.current a').textContent"
        " === document.getElementById('session-title').textContent", timeout=WAIT)
    assert page.inner_text("#sidebar-recent .sidebar-item.current a") == "first question"
    page.reload()
    title = page.inner_text("#session-title")
    item = page.locator("#sidebar-recent .sidebar-item.current")
    assert item.inner_text().startswith(title)
    assert page.is_visible("#admin-link")  # the demo user is staff

    # Pin it: it moves to the Pinned list (htmx swap), and stays there after a reload.
    item.locator(".pin-button").click()
    page.wait_for_selector("#sidebar-pinned .sidebar-item.current")
    page.reload()
    assert page.locator("#sidebar-pinned .sidebar-item").count() == 1

    # Ctrl+K focuses the search; typing filters the titles.
    new_session(page, url)
    page.keyboard.press("Control+k")
    assert page.evaluate("document.activeElement.id") == "sidebar-q"
    page.keyboard.type("first quest")
    page.wait_for_selector("#sidebar-sessions >> text=Matching")
    assert page.locator("#sidebar-sessions .sidebar-item").count() == 1

    # "?" opens the shortcut list (not while typing), Esc closes it.
    page.click("#transcript")
    page.keyboard.press("?")
    page.wait_for_selector("#shortcuts[open]")
    assert "Ctrl" in page.inner_text("#shortcuts")
    page.keyboard.press("Escape")
    page.wait_for_selector("#shortcuts:not([open])", state="attached")

    # Collapse the sidebar; it stays collapsed on the next page.
    page.click("#sidebar-toggle")
    assert not page.is_visible("#sidebar")
    page.goto(chat_url)
    assert not page.is_visible("#sidebar")
    assert page.get_attribute("#sidebar-toggle", "aria-expanded") == "false"
    page.click("#sidebar-toggle")
    assert page.is_visible("#sidebar")
    shot(page, "chat-desktop-light")
    context.close()


def test_phone_has_one_header_row_and_a_drawer(server, browser):
    url, _, password = server
    context, page = logged_in(browser, url, "demo", password, viewport=PHONE)
    header = page.locator(".site-header").bounding_box()
    assert header["height"] < 60, header
    assert not page.is_visible("#sidebar")
    assert not page.is_visible(".site-header .site-nav")
    page.click("#sidebar-toggle")
    page.wait_for_function("() => document.getElementById('sidebar').getBoundingClientRect().left >= 0")
    assert page.is_visible("#sidebar-new-session") and page.is_visible(".sidebar-nav >> text=Settings")
    shot(page, "drawer-phone")
    page.keyboard.press("Escape")
    page.wait_for_function("() => !document.body.classList.contains('drawer-open')")
    chat_url = new_session(page, url)
    assert page.evaluate("document.scrollingElement.scrollWidth") <= 390
    page.goto(chat_url)
    shot(page, "chat-phone-light")
    context.close()


def test_edit_regenerate_and_fork(server, browser):
    url, _, password = server
    context, page = logged_in(browser, url, "demo", password, viewport=DESKTOP)
    new_session(page, url)
    send(page, "first question")
    page.wait_for_selector("#transcript >> text=First answer.")
    page.reload()

    # Edit the user message: the old exchange is taken back, the new one runs.
    user_msg = page.locator(".msg-user").first
    user_msg.locator(".msg-edit > summary").click()
    user_msg.locator("textarea").fill("edited question")
    with page.expect_navigation():
        user_msg.locator("text=Save and re-run").click()
    page.wait_for_selector("#transcript >> text=Answer to the edited question.", timeout=WAIT)
    page.wait_for_selector("#turn-status[data-state=idle]", timeout=WAIT)
    page.reload()
    text = page.inner_text("#transcript")
    assert "First answer." not in text and "first question" not in text
    assert text.count("edited question") == 2  # the question and "Answer to the edited question."
    assert "tokens in" not in text.split("You")[0]  # no usage line left from the rewound turn

    # Regenerate: the same question again, one answer shown.
    with page.expect_navigation():
        page.click("#regenerate-button")
    page.wait_for_selector("#transcript >> text=Answer to the edited question.", timeout=WAIT)
    page.wait_for_selector("#turn-status[data-state=idle]", timeout=WAIT)
    page.reload()
    assert page.inner_text("#transcript").count("Answer to the edited question.") == 1

    # Fork at the reply: a new session holding the conversation up to there.
    original = page.url
    page.locator(".msg-assistant .fork-button").last.click()
    page.wait_for_function(f"() => location.href !== {original!r}")
    page.wait_for_selector("#transcript >> text=Answer to the edited question.")
    assert "This is a fork of" in page.inner_text(".flash")
    assert page.inner_text("#session-title").startswith("Fork of")
    context.close()


def test_escape_stops_a_running_turn(server, browser):
    url, _, password = server
    context, page = logged_in(browser, url, "demo", password, viewport=DESKTOP)
    new_session(page, url)
    send_message(page, "sleep please")
    page.wait_for_selector(".tool-card[data-status=running]", timeout=WAIT)
    page.click("#transcript")  # the key goes to the page, not the composer
    page.keyboard.press("Escape")
    page.wait_for_selector(".tool-card[data-status=stopped]", timeout=WAIT)
    page.wait_for_selector("#turn-status[data-state=cancelled], #turn-status[data-state=idle]",
                           timeout=WAIT)
    context.close()


def test_gauge_breakdown_compact_now_and_model_switch(server, browser):
    url, _, password = server
    context, page = logged_in(browser, url, "demo", password, viewport=DESKTOP)
    new_session(page, url)
    send(page, "first question")
    page.reload()
    # The bar's parts get their widths from data-width (the CSP forbids inline styles).
    widths = page.evaluate("""() => [...document.querySelectorAll('#gauge [data-width]')]
        .map(el => [el.dataset.width + '%', el.style.width])""")
    assert len(widths) == 2 and all(a == b for a, b in widths), widths
    assert "% context" in page.inner_text("#gauge > summary")
    page.click("#gauge > summary")
    breakdown = page.inner_text(".gauge-breakdown")
    assert "System prompt + tools" in breakdown and "Compaction at" in breakdown
    assert "150,000" in breakdown and "calibrated" in breakdown
    shot(page, "gauge-open")
    # "Compact now" queues a /compact turn (this short session has nothing to reduce; the
    # reductions list is checked in tests/ui/test_files_gauge.py).
    page.evaluate("""() => { window.__queued = [];
        new MutationObserver((records) => records.forEach((r) => r.addedNodes.forEach((n) => {
            if (n.classList && n.classList.contains('queued-input'))
                window.__queued.push(n.textContent); }))
        ).observe(document.getElementById('transcript'), {childList: true}); }""")
    page.click("#compact-now")
    page.wait_for_function("() => window.__queued.some((t) => t.includes('/compact'))",
                           timeout=WAIT)  # shown while queued (it may run at once)
    page.wait_for_selector("#turn-status[data-state=idle]", timeout=WAIT)
    # Processed, the command's queued bubble goes, as a message's does (a user's finding:
    # "queued /compact" stayed in the transcript until a reload).
    page.wait_for_selector("#transcript .queued-input", state="detached", timeout=5_000)
    # Its outcome is said, live and after a reload; no "0 tokens in … 0 out ·" line for a
    # command that called no model (a user's finding).
    page.wait_for_selector("#transcript .notice >> text=/compact: nothing to reduce.",
                           timeout=WAIT)
    for _ in range(2):
        transcript = page.inner_text("#transcript")
        assert transcript.count("/compact: nothing to reduce.") == 1, transcript
        assert "\n0 tokens in" not in transcript and " out ·\n" not in transcript
        assert page.locator("#transcript .usage").count() == 1  # the first question's
        page.reload()
        page.wait_for_selector("#transcript .notice >> text=/compact: nothing to reduce.")

    page.click("#model-picker > summary")
    page.select_option("#model-choice", "simulator-openai|hermes-simulator")
    page.click("#model-picker >> text=Switch")
    page.wait_for_selector(".flash >> text=Now using simulator-openai")
    assert "simulator-openai" in page.inner_text("#model-picker > summary")
    send(page, "first question")
    assert page.inner_text("#transcript").count("First answer.") == 2
    context.close()


def test_workspace_panel_tree_preview_upload_and_tool_writes(server, browser, tmp_path):
    url, _, password = server
    context, page = logged_in(browser, url, "demo", password, viewport=DESKTOP)
    new_session(page, url)
    page.wait_for_selector(".file-tree >> text=README.md")
    page.click(".file-tree >> text=README.md")
    page.wait_for_selector("#file-preview >> text=Welcome to your Hermes workspace")
    assert page.locator("#file-preview .gh, #file-preview span").count() > 0  # highlighted
    # Upload: a small file lands in the tree; one past the cap says why.
    small = tmp_path / "data.csv"
    small.write_text("a,b\n1,2\n")
    page.set_input_files("#upload-file", str(small))
    page.click(".upload-form button")
    page.wait_for_selector(".file-tree >> text=data.csv")
    # The panel was just swapped (and may be swapped again by the workspace.changed event):
    # let htmx settle before choosing the next file, or the file lands on a detached input.
    page.wait_for_load_state("networkidle")
    big = tmp_path / "big.bin"
    big.write_bytes(b"x" * 2001)
    page.set_input_files("#upload-file", str(big))
    page.click(".upload-form button")
    page.wait_for_selector("#files-error >> text=over the upload limit of 2,000 bytes")
    # A name with folders is saved under its last part, and the panel says so (a user's
    # finding: "../../escape.txt" became "escape.txt" silently). The response is read, as
    # the workspace.changed refresh may redraw the panel without the notice at any moment.
    page.wait_for_load_state("networkidle")
    page.set_input_files("#upload-file", files=[{"name": "../../escape.txt",
                                                 "mimeType": "text/plain", "buffer": b"x"}])
    with page.expect_response(lambda r: r.request.method == "POST"
                              and "/files/upload" in r.url) as posted:
        page.click(".upload-form button")
    assert ("“../../escape.txt” was saved as escape.txt: uploads go to the workspace root"
            in posted.value.text()), posted.value.text()
    page.wait_for_selector(".file-tree >> text=escape.txt")
    # A tool writes a file: the panel refreshes by itself.
    send(page, "make notes")
    page.wait_for_selector(".file-tree >> text=notes.md", timeout=WAIT)
    shot(page, "workspace-panel")
    context.close()


NOTIFY_STUB = """
Object.defineProperty(document, 'hidden', {get: () => window.__hidden === true});
window.__notes = [];
window.Notification = function (title, options) { window.__notes.push(title); };
window.Notification.permission = 'granted';
window.Notification.requestPermission = () => Promise.resolve('granted');
"""


def test_hidden_tab_gets_a_title_badge_and_a_notification_for_an_approval(server, browser):
    url, _, password = server
    context, page = logged_in(browser, url, "demo", password, viewport=DESKTOP)
    context.add_init_script(NOTIFY_STUB)
    new_session(page, url)
    page.reload()
    page.evaluate("window.__hidden = true")
    send_message(page, "clean up")
    page.wait_for_function("() => document.title.startsWith('(1) ')", timeout=WAIT)
    assert page.evaluate("window.__notes") == ["An approval is waiting"]
    page.evaluate("window.__hidden = false; document.dispatchEvent(new Event('visibilitychange'))")
    page.wait_for_function("() => !document.title.startsWith('(')")
    manifest = page.evaluate("""async () => {
        const link = document.querySelector('link[rel=manifest]');
        const r = await fetch(link.href); return [r.status, (await r.json()).icons.length];
    }""")
    assert manifest == [200, 4]
    page.click("#stop-button")
    context.close()
