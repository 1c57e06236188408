"""SIGKILL a real Celery worker process mid-tool-call and mid-stream: the turn resumes on
another worker (acks_late + the Redis visibility timeout redeliver the task; the dead
worker's lease expires), the user's message and every stored event are kept, and the
side-effecting command is not run twice (the model is told its outcome is unknown)."""

from __future__ import annotations

import time

import pytest
from django.conf import settings as django_settings
from playwright.sync_api import sync_playwright
from redis import Redis

from simulator.script import Reply, Script, ScriptRequest, ToolCallSpec
from agents.tools.ledger import UNKNOWN_OUTCOME
from sessions.models import Message, RunEvent, Turn
from sessions.services import session_create, turn_start, workspace_path
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS, logged_in, send_message, wait_for_chat
from hermes_web.celery import restore_options
from tests.reliability.conftest import PYTHON, VISIBILITY_TIMEOUT, free_port, wait_for

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(180)]


def _events(session) -> list[tuple[int, int, str]]:
    return list(RunEvent.objects.filter(session=session).order_by("seq")
                .values_list("id", "seq", "type"))


def _finished(turn):
    turn.refresh_from_db()
    return turn.status in (Turn.Status.COMPLETED, Turn.Status.FAILED, Turn.Status.CANCELLED)


def test_sigkill_mid_tool_call_resumes_on_another_worker_and_never_reruns_the_call(
        make_user, simulator, service_env, celery_worker_proc):
    def policy(request: ScriptRequest) -> Reply:
        if request.tool_results:
            return Reply(text="tool said: " + " | ".join(r.result for r in request.tool_results))
        return Reply(text="running it", tool_calls=(ToolCallSpec(
            name="terminal", input={"command": "echo ran >> effects.txt; sleep 20; echo end"}),))

    simulator.state.script = Script(policy)
    user = make_user("kim")
    session = session_create(user=user)
    effects = workspace_path(session) / "effects.txt"
    first = celery_worker_proc("worker-a")
    turn = turn_start(session=session, user=user, text="append to the effects file")
    wait_for(lambda: effects.exists(), timeout=60, what="the command to start")
    before = _events(session)
    killed_at = time.monotonic()
    first.kill()
    celery_worker_proc("worker-b")
    wait_for(lambda: _finished(turn), timeout=90, what="the turn to finish on worker-b")
    recovery = time.monotonic() - killed_at
    assert turn.status == Turn.Status.COMPLETED, turn.error
    assert effects.read_text().splitlines() == ["ran"]  # the side effect happened once
    result = Message.objects.get(session=session, role="tool")
    assert result.is_error and result.content == UNKNOWN_OUTCOME
    assert Message.objects.filter(session=session, role="user").count() == 1
    after = _events(session)
    assert set(before) <= set(after)  # every event stored before the kill is kept
    assert [seq for _, seq, _ in after] == list(range(1, len(after) + 1))
    assert "turn.recovered" in [t for _, _, t in after]
    print(f"\nRECOVERY sigkill-mid-tool-call: {recovery:.1f} s")


def test_sigkill_mid_stream_resumes_and_the_reply_arrives_once(
        make_user, simulator, service_env, celery_worker_proc):
    long_text = " ".join(f"word{n}" for n in range(120))
    simulator.state.script = Script(lambda request: Reply(text=long_text, token_delay=0.05))
    user = make_user("lee")
    session = session_create(user=user)
    first = celery_worker_proc("worker-a")
    turn = turn_start(session=session, user=user, text="tell me a long story")
    wait_for(lambda: RunEvent.objects.filter(session=session, type="text.delta").count() >= 3,
             timeout=60, what="the stream to start")
    before = _events(session)
    killed_at = time.monotonic()
    first.kill()
    celery_worker_proc("worker-b")
    wait_for(lambda: _finished(turn), timeout=90, what="the turn to finish on worker-b")
    recovery = time.monotonic() - killed_at
    assert turn.status == Turn.Status.COMPLETED, turn.error
    assert Message.objects.filter(session=session, role="user").count() == 1
    replies = list(Message.objects.filter(session=session, role="assistant"))
    assert len(replies) == 1 and replies[0].content.strip() == long_text
    after = _events(session)
    assert set(before) <= set(after)
    assert [seq for _, seq, _ in after] == list(range(1, len(after) + 1))
    assert len(simulator.state.requests) == 2  # the cut stream and the resumed one
    print(f"\nRECOVERY sigkill-mid-stream: {recovery:.1f} s")


# The page's half of the same failure: the resumed worker asks the model again for the
# reply being streamed, so the open page receives that reply's deltas a second time; it must
# start the reply over, not append the new stream to the dead worker's partial text.
STREAM_WATCH = """() => {
  window.__streamed = [];
  new MutationObserver(() => {
    const text = document.querySelector('#streaming .stream-text');
    const now = text ? text.textContent : null;
    if (now && now !== window.__streamed[window.__streamed.length - 1]) window.__streamed.push(now);
  }).observe(document.getElementById('transcript'),
             {subtree: true, childList: true, characterData: true});
}"""


@pytest.mark.browser
def test_sigkill_mid_stream_the_open_page_shows_the_reply_once(
        make_user, simulator, service_env, celery_worker_proc, procs, monkeypatch):
    # Playwright's sync API keeps an asyncio loop current in this thread, which Django takes
    # for an async context and refuses ORM calls in; nothing of Django runs on that loop
    # (the documented escape, docs.djangoproject.com "Async safety"). For this test only:
    # the browser is started and closed here, not shared with later tests.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    long_text = " ".join(f"word{n}" for n in range(120))
    simulator.state.script = Script(lambda request: Reply(text=long_text, token_delay=0.05))
    user = make_user("ula")
    session = session_create(user=user)
    port = free_port()
    daphne = procs("daphne", [str(PYTHON), "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                              "hermes_web.asgi:application"], service_env)
    wait_for(lambda: "Listening on" in daphne.output() or daphne.popen.poll() is not None,
             timeout=60, what="daphne to listen")
    first = celery_worker_proc("worker-a")
    url = f"http://127.0.0.1:{port}"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            _watch_the_stream_through_a_kill(browser, url, session, first, celery_worker_proc,
                                             long_text)
        finally:
            browser.close()


def _watch_the_stream_through_a_kill(browser, url, session, first, celery_worker_proc,
                                     long_text) -> None:
    context, page = logged_in(browser, url, "ula", "pw-ula")
    try:
        page.set_default_timeout(30_000)
        page.goto(f"{url}/sessions/{session.pk}/")
        wait_for_chat(page)
        page.evaluate(STREAM_WATCH)
        send_message(page, "tell me a long story")
        page.wait_for_function("() => window.__streamed.length >= 3")
        first.kill()
        celery_worker_proc("worker-b")
        turn = Turn.objects.get(session=session)
        wait_for(lambda: _finished(turn), timeout=90, what="the turn to finish on worker-b")
        assert turn.status == Turn.Status.COMPLETED, turn.error
        page.wait_for_selector("#transcript .msg-assistant:not(.streaming)")
        streamed = page.evaluate("() => window.__streamed")
        # Every text the bubble ever showed is a beginning of the reply: before the fix the
        # resumed stream was appended to the cut one ("word0 … word7word0 word1 …").
        doubled = [text for text in streamed if not long_text.startswith(text)]
        assert not doubled, doubled[:1]
        cut = next(i for i, text in enumerate(streamed[1:], 1)
                   if len(text) < len(streamed[i - 1]))  # the resumed stream began again
        assert cut < len(streamed) - 1, "the resumed stream was not shown"
        assert page.locator("#transcript .msg-assistant").count() == 1
        assert page.inner_text("#transcript .msg-assistant .msg-body").strip() == long_text
    finally:
        context.close()


def test_a_worker_killed_holding_the_restore_mutex_delays_recovery_by_seconds_not_minutes(
        make_user, simulator, service_env, celery_worker_proc):
    """kombu's sweep for abandoned tasks takes the Redis key "unacked_mutex"; a worker
    SIGKILLed inside a sweep leaves it held until it expires (kombu's default: 300 s, during
    which no worker restores any dead worker's task; seen in CI as two recoveries timing
    out). The key is left here exactly as such a worker leaves it, with the expiry the
    workers are configured with (hermes_web/celery.py), and the turn still resumes."""
    simulator.state.script = Script(lambda request: Reply(text="done") if request.tool_results
                                    else Reply(text="running it", tool_calls=(ToolCallSpec(
                                        name="terminal", input={"command": "sleep 20"}),)))
    user = make_user("mo")
    session = session_create(user=user)
    first = celery_worker_proc("worker-a")
    turn = turn_start(session=session, user=user, text="wait a while")
    wait_for(lambda: RunEvent.objects.filter(session=session, type="tool.called").exists(),
             timeout=60, what="the command to start")
    first.kill()
    expire = restore_options(VISIBILITY_TIMEOUT)["unacked_mutex_expire"]  # the workers' value
    redis = Redis.from_url(django_settings.REDIS_URL)
    redis.set("unacked_mutex", "held-by-the-dead-worker", ex=expire)
    killed_at = time.monotonic()
    celery_worker_proc("worker-b")
    wait_for(lambda: _finished(turn), timeout=60, what="the turn to finish on worker-b")
    assert turn.status == Turn.Status.COMPLETED, turn.error
    print(f"\nRECOVERY sigkill-holding-the-mutex: {time.monotonic() - killed_at:.1f} s "
          f"(mutex expiry {expire} s)")
