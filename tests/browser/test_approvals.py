"""The approval gate in a real browser (issue 5): Debian's chromium driven by Playwright,
daphne serving the app in embedded mode (SQLite, the in-process Celery worker, the expiry
sweep thread and the provider simulator), exactly what `make run` starts. Nothing is
downloaded.

Two browser contexts: the session's owner (a plain member of team "demo") on the chat page,
and the team admin (the demo user) on the review queue. The simulated model asks to run
``rm -rf build``; the owner's page shows the pending card and the header badge; the admin
approves (then denies with a reason, then lets one expire) from /approvals/; the owner sees
each outcome arrive over the websocket without reloading: the card's state, the tool card
finishing, the model's reply. HERMES_APPROVAL_TIMEOUT is short so the expiry happens in
seconds.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from tests.browser.conftest import sim_headers
from tests.browser.conftest import embedded_server
from tests.browser.conftest import logged_in as login_context
from tests.browser.conftest import send_message

pytestmark = pytest.mark.browser

APPROVAL_TIMEOUT = 12
"""Seconds before a pending request expires: long enough for the admin's clicks on a busy
machine, short enough for the expiry case (the embedded sweep runs every second)."""
OWNER, OWNER_PASSWORD = "olga", "olga-correct-horse-42"
DEADLINE = 90.0
"""The whole module (server start included) must finish within this many seconds."""
WAIT_MS = 20_000
"""Bound for a live update to reach a page (ms); they normally take well under a second."""

RULES = [
    {"tool_result": "keep it please", "text": "Understood: the build stays, as you asked."},
    {"tool_result": "approval timed out", "text": "Nobody answered in time; nothing was run."},
    {"tool_result": "exit code 0", "text": "The build directory is gone. " + " ".join(
        f"w{n}" for n in range(30)) + " END.", "token_delay": 0.02},
    {"user": "clean", "text": "I will remove the build directory.",
     "tool_calls": [{"name": "terminal", "input": {"command": "rm -rf build"}}]},
]
SETUP = f"""
from django.core.management import call_command
call_command("migrate", interactive=False, verbosity=0)
call_command("demo_user")
from django.contrib.auth import get_user_model
from accounts.models import Membership, Team
user = get_user_model().objects.create_user(username={OWNER!r}, password={OWNER_PASSWORD!r})
Membership.objects.create(user=user, team=Team.objects.get(name="demo"), role="member")
"""

timings: dict[str, float] = {}
_begin: list[float] = []


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """daphne in embedded mode with a short approval timeout and the local backend (under
    the sandbox the policy would not ask); yields (url, sim_url, admin password, data dir)."""
    begin = time.monotonic()
    _begin.append(begin)
    data = tmp_path_factory.mktemp("hermes-approvals")
    env = {"HERMES_BACKEND": "local", "HERMES_APPROVAL_TIMEOUT": str(APPROVAL_TIMEOUT)}
    # One process for migrate, the demo admin and the owner: each Django start costs seconds.
    with embedded_server(data, env_extra=env, setup=SETUP) as (url, sim_url, password):
        timings["server start (s)"] = time.monotonic() - begin
        yield url, sim_url, password, data


def logged_in(browser, url: str, username: str, password: str):
    context, page = login_context(browser, url, username, password)
    page.set_default_timeout(WAIT_MS)
    return context, page


def ask_and_wait_for_card(owner, workspace: Path, text: str, meanwhile=None) -> str:
    """The owner sends ``text``; the pending card arrives live. Returns the approval's DOM
    id. The build directory exists before, and still exists while the card is pending.
    ``meanwhile()`` runs between sending and waiting (the first turn starts cold)."""
    (workspace / "build").mkdir(parents=True, exist_ok=True)
    (workspace / "build" / "keep.txt").write_text("artefact")
    before = owner.locator(".approval-card").count()
    send_message(owner, text)
    if meanwhile is not None:
        meanwhile()
    card = owner.locator(".approval-card").nth(before)
    card.wait_for()
    assert card.get_attribute("data-state") == "pending"
    assert "rm -rf build" in card.locator(".approval-command").inner_text()
    owner.wait_for_selector("#turn-status[data-state=awaiting_approval]")
    owner.wait_for_function("() => { const b = document.getElementById('approvals-badge');"
                            " return b && b.textContent === '1' && b.offsetParent !== null; }")
    tool = owner.locator(".tool-card").nth(before)
    # Nothing runs before the decision, and the card says so (it said "running").
    owner.wait_for_selector(f".tool-card >> nth={before} >> .tool-status:text-is('awaiting approval')")
    assert tool.get_attribute("data-status") == "waiting"
    assert (workspace / "build" / "keep.txt").exists()
    return f"approval-{card.get_attribute('data-approval-id')}"


def admin_decides(admin, url: str, card_id: str, choice: str, reason: str = "",
                  reload: bool = True) -> None:
    """The admin decides on /approvals/ (``reload``: opened afresh; else the page the
    admin already has open, which must have shown the card by itself)."""
    if reload:
        admin.goto(f"{url}/approvals/")
    assert admin.locator("#approvals-badge").inner_text() == "1"
    card = admin.locator(f"#{card_id}")
    assert card.get_attribute("data-state") == "pending"
    if reason:
        card.locator("input[name=reason]").fill(reason)
    card.locator(f"button[name=choice][value={choice}]").click()
    expected = "denied" if choice == "deny" else "approved"
    admin.wait_for_selector(f"#{card_id}[data-state={expected}]")


def outcome(owner, card_id: str, state: str, tool_index: int, tool_status: str,
            reply: str) -> str:
    """Wait for the owner's page to show the decision, the tool card's end and the reply;
    return the tool card's text."""
    owner.wait_for_selector(f"#{card_id}[data-state={state}]")
    tool = owner.locator(".tool-card").nth(tool_index)
    owner.wait_for_function(
        "([i, s]) => { const c = document.querySelectorAll('.tool-card')[i];"
        " return c && c.dataset.status === s; }", arg=[tool_index, tool_status])
    owner.wait_for_selector(f"#transcript >> text={reply}")
    owner.wait_for_selector("#turn-status[data-state=idle]")
    owner.wait_for_function("() => { const b = document.getElementById('approvals-badge');"
                            " return !b || b.offsetParent === null; }")
    return tool.text_content()


def test_owner_sees_admin_decisions_and_expiry_live(server, browser):
    url, sim_url, password, data = server
    httpx.post(f"{sim_url}/_sim/script", json={"rules": RULES},
               headers=sim_headers(sim_url), timeout=10).raise_for_status()
    owner_context, owner = logged_in(browser, url, OWNER, OWNER_PASSWORD)
    owner.click("#new-session")
    owner.wait_for_selector("#composer-text")
    session_id = owner.locator("#chat").get_attribute("data-session-id")
    workspace = data / "workspaces" / session_id
    owner.evaluate("() => { window.__notReloaded = true; }")

    # 1. Approve once: the command runs, the reply streams in.
    start = time.monotonic()
    admin_side: list = []  # the admin logs in while the owner's first turn warms up
    card_id = ask_and_wait_for_card(
        owner, workspace, "please clean the build",
        meanwhile=lambda: admin_side.extend(logged_in(browser, url, "demo", password)))
    admin_context, admin = admin_side
    timings["ask → pending card, admin logged in meanwhile (s)"] = time.monotonic() - start
    start = time.monotonic()
    admin_decides(admin, url, card_id, "once")
    tool_text = outcome(owner, card_id, "approved", 0, "done", "END.")
    timings["admin approves → owner sees final reply (s)"] = time.monotonic() - start
    assert "Approved (once) by demo" in owner.locator(f"#{card_id}").inner_text()
    assert "[exit code 0]" in tool_text
    assert not (workspace / "build").exists()
    assert "The build directory is gone." in owner.locator("#transcript").inner_text()

    # 2. Deny with a reason: nothing runs; the reason reaches the model and the chat. The
    # admin's queue page, open since the first decision, shows the new request by itself
    # (static/approvals.js; a new user's finding: it stayed hidden until a reload).
    admin.evaluate("() => { window.__queueNotReloaded = true; }")
    card_id = ask_and_wait_for_card(owner, workspace, "clean the build again")
    admin.wait_for_selector(f"#{card_id}[data-state=pending]")
    assert admin.evaluate("() => window.__queueNotReloaded === true")
    assert admin.locator("#pending-h").inner_text() == "Pending (1)"
    start = time.monotonic()
    admin_decides(admin, url, card_id, "deny", reason="keep it please", reload=False)
    # The card keeps saying "denied" when the result arrives (a fresh user saw it turn
    # into "error": the call never ran).
    tool_text = outcome(owner, card_id, "denied", 1, "denied",
                        "Understood: the build stays, as you asked.")
    timings["admin denies → owner sees reply (s)"] = time.monotonic() - start
    assert "denied by demo: keep it please" in tool_text
    assert "keep it please" in owner.locator(f"#{card_id}").inner_text()
    assert (workspace / "build" / "keep.txt").read_text() == "artefact"

    # 3. Nobody decides: the embedded sweep expires it, fail-closed, and the turn goes on.
    start = time.monotonic()
    card_id = ask_and_wait_for_card(owner, workspace, "clean the build a third time")
    owner.wait_for_selector(f"#{card_id}[data-state=expired]",
                            timeout=(APPROVAL_TIMEOUT + 15) * 1000)
    tool_text = outcome(owner, card_id, "expired", 2, "expired",
                        "Nobody answered in time; nothing was run.")
    timings["ask → expiry seen by owner (s)"] = time.monotonic() - start
    assert "not executed: approval timed out" in tool_text
    assert (workspace / "build" / "keep.txt").exists()
    admin.goto(f"{url}/approvals/")
    assert admin.locator(f"#{card_id}").get_attribute("data-state") == "expired"
    assert admin.locator("#no-pending").is_visible()

    # All of it arrived live: the owner's page was never reloaded.
    assert owner.evaluate("() => window.__notReloaded === true")
    assert owner.locator(".approval-card").count() == 3
    owner_context.close()
    admin_context.close()
    timings["module total (s)"] = time.monotonic() - _begin[0]
    print("\napproval browser timings: " + ", ".join(
        f"{name} {value:.1f}" for name, value in timings.items()))
    assert timings["module total (s)"] < DEADLINE
