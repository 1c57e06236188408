"""Context management on the real database and the simulator: compaction as a flag flip,
the breaker on the row, prune with its re-arm level, rewind, recall."""

from __future__ import annotations

import pytest

from simulator.script import Reply, Script, ToolCallSpec
from sessions.context import breaker_load
from sessions.models import Message, RunEvent, Turn
from sessions.search import message_search, session_search_for_tool
from sessions.services import session_create, session_rewind, turn_start, workspace_path
from sessions.tasks import turn_run_task

pytestmark = pytest.mark.django_db(transaction=True)

WINDOW = 21_000  # tokens: threshold 15,750 (75% under 512K), tail 4,200 (20% cap); 20K
# before the issue-13 tool schemas (~800 tokens of floor) were added to every request


def reader_policy(request):
    """Each user turn reads big.txt once, then answers; summary requests get a summary."""
    if not request.tool_names:
        return Reply(text="Earlier the user asked to read big.txt several times; it holds "
                          "filler lines about topic zebra.")
    if request.tool_results:
        return Reply(text=f"Read it (iteration {request.iteration}).")
    return Reply(text="Reading.", tool_calls=(
        ToolCallSpec(name="read_file", input={"path": "big.txt"}),))


@pytest.fixture
def small_window(make_user, hermes_settings, simulator):
    hermes_settings.HERMES = {**hermes_settings.HERMES, "CONTEXT_WINDOW": WINDOW,
                              "RETRY_BASE_DELAY": 0.01, "BACKEND": "local"}
    simulator.state.configure(context_window=WINDOW)
    simulator.state.script = Script(reader_policy)
    user = make_user("carol")
    session = session_create(user=user)
    lines = [f"line {i}: filler text about topic zebra number {i} " * 2 for i in range(160)]
    (workspace_path(session) / "big.txt").write_text("\n".join(lines))  # ~3,000 tokens
    return user, session


def chat(user, session, text):
    turn_start(session=session, user=user, text=text)
    turn_run_task.apply(args=[session.pk])
    return Turn.objects.filter(session=session).order_by("-id").first()


def test_compaction_flips_flags_keeps_the_id_and_the_session_goes_on(small_window, simulator):
    user, session = small_window
    for n in range(8):
        assert chat(user, session, f"please read big.txt, round {n}").status == "completed"
    events = list(RunEvent.objects.filter(session=session, type="compaction"))
    assert events, "a 20K window must compact within 8 reads of a 3K-token file"
    first = events[0].payload
    assert first["tokens_after"] < first["tokens_before"]
    archived = Message.objects.filter(session=session, active=False, compacted=True)
    assert archived.count() >= first["messages_archived"]
    live = list(Message.objects.filter(session=session, active=True).order_by("id"))
    summaries = [m for m in live if m.kind == "summary"]
    assert len(summaries) == 1 and "topic zebra" in summaries[0].content
    # Nothing deleted, same session id, and every request passed the simulator's validator.
    assert Message.objects.filter(session=session).count() > len(live)
    assert all(r.status == 200 for r in simulator.state.requests)
    session.refresh_from_db()
    assert session.compaction_count == len(events)
    # Summarised-away rows stay findable by recall; the model no longer sees them.
    hits = message_search(user=user, query="round 0")
    assert hits and not hits[-1].active


def test_manual_compact_command_runs_without_a_model_turn(small_window):
    user, session = small_window
    for n in range(3):
        chat(user, session, f"please read big.txt, round {n}")
    turn = chat(user, session, "/compact")
    assert turn.status == "completed"
    assert RunEvent.objects.filter(session=session, type="compaction",
                                   payload__reason="manual").exists()
    assert not Message.objects.filter(session=session, content="/compact").exists()


def test_compact_outcome_shows_live_and_after_reload_and_no_empty_usage_line(small_window,
                                                                              client):
    """A user's finding: "Compact now" on a short session left "0 tokens in (0 cache read, 0
    cache write) · 0 out ·" and no word on what happened. The command's outcome is a notice,
    on the socket and on the page; a turn without a model call has no usage line."""
    from sessions.rendering import event_frame

    user, session = small_window
    chat(user, session, "please read big.txt, round 0")
    turn = chat(user, session, "/compact")  # one exchange: nothing to reduce, no model call
    assert turn.status == "completed"
    finished = RunEvent.objects.get(session=session, type="turn.finished",
                                    payload__turn_id=turn.pk)
    assert finished.payload["command"] == "compact"
    live = event_frame({"seq": finished.seq, "type": finished.type, "session_id": session.pk,
                        "ts": 0.0, "payload": finished.payload})["html"]
    assert f'id="turn-outcome-{turn.pk}"' in live and "/compact: nothing to reduce." in live
    assert "tokens in" not in live
    client.force_login(user)
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert page.count("/compact: nothing to reduce.") == 1
    assert page.count('class="usage"') == 1  # the chat turn's line, not the command's
    assert " out ·</p>" not in page and " out · </p>" not in page


def test_usage_line_has_no_dangling_separator_without_a_price():
    """An unpriced model's line ends at "out", not at a "·" with nothing after it."""
    from sessions.rendering import event_frame

    payload = {"turn_id": 5, "usage": {"input_tokens": 10, "output_tokens": 3,
                                       "cost_usd": None}}
    html = event_frame({"seq": 1, "type": "turn.finished", "session_id": 1, "ts": 0.0,
                        "payload": payload})["html"]
    assert "13 tokens in" not in html and "10 tokens in" in html
    assert "3 out</p>" in html
    priced = event_frame({"seq": 2, "type": "turn.finished", "session_id": 1, "ts": 0.0,
                          "payload": {**payload, "usage": {**payload["usage"],
                                                           "cost_usd": "0.0012"}}})["html"]
    assert '3 out · <span class="cost">' in priced


def test_breaker_state_lives_on_the_row_and_survives_a_new_worker(small_window):
    user, session = small_window
    from django.conf import settings

    home = settings.HERMES["HOME"]
    home.mkdir(parents=True, exist_ok=True)
    # An identity so large that the floor alone sits over the threshold: incompressible.
    (home / "SOUL.md").write_text("You are a careful agent. " * 1_900)
    session = session_create(user=user)
    (workspace_path(session) / "big.txt").write_text("zebra filler line\n" * 100)
    for n in range(10):
        chat(user, session, f"please read big.txt, round {n}")
    session.refresh_from_db()
    breaker = breaker_load(session)  # what any worker binding to the session rehydrates
    assert breaker.ineffective_count >= 2
    assert session.compaction_state["ineffective_count"] == breaker.ineffective_count
    assert not breaker.may_compact().allowed
    automatic = RunEvent.objects.filter(session=session, type="compaction",
                                        payload__reason="threshold")
    before = automatic.count()
    assert chat(user, session, "please read big.txt once more").status == "completed"
    # Tripped: no more automatic compactions (only the provider-overflow backstop may run).
    assert automatic.count() == before


def test_rewind_hides_the_last_exchange_from_model_and_search(small_window):
    user, session = small_window
    chat(user, session, "please read big.txt about quokka")
    chat(user, session, "please read big.txt about wombat")
    assert session_rewind(session=session) == 4
    live = Message.objects.filter(session=session, active=True)
    assert not live.filter(content__contains="wombat").exists()
    assert live.filter(content__contains="quokka").exists()
    assert message_search(user=user, query="wombat") == []
    assert message_search(user=user, query="quokka")


def test_session_search_tool_dedupes_by_lineage_and_returns_a_window(small_window):
    user, session = small_window
    chat(user, session, "please read big.txt about narwhal")
    chat(user, session, "please read big.txt about narwhal again")
    hits = session_search_for_tool(session=session, query="narwhal")
    assert len(hits) == 1 and hits[0]["current_session"]
    assert hits[0]["window"] and "«" in hits[0]["snippet"] or "narwhal" in hits[0]["snippet"]
    assert session_search_for_tool(session=session, query='" OR 1=1 -- NEAR(') == []


def test_search_is_scoped_to_the_owner(small_window, make_user):
    user, session = small_window
    chat(user, session, "please read big.txt about axolotl")
    other = make_user("mallory")
    assert message_search(user=other, query="axolotl") == []
    assert message_search(user=user, query="axolotl")


def test_cold_resume_prunes_hard_before_the_first_request(small_window, simulator):
    from datetime import timedelta

    from django.utils import timezone

    user, session = small_window
    for n in range(3):
        chat(user, session, f"please read big.txt, round {n}")
    assert not RunEvent.objects.filter(session=session, type="prune").exists()
    # The session was last active long ago: its cached prefix has expired.
    Message.objects.filter(session=session).update(
        created_at=timezone.now() - timedelta(minutes=30))
    chat(user, session, "please read big.txt again after lunch")
    prune = RunEvent.objects.get(session=session, type="prune")
    assert prune.payload["cold"] and prune.payload["reclaimed"] > 0
    pruned = Message.objects.filter(session=session, role="tool").exclude(sent_content=None)
    assert pruned.exists()
    assert all(len(m.content) > len(m.sent_content) for m in pruned)  # full text kept


def test_idle_compaction_on_resume_when_configured(small_window, settings):
    from datetime import timedelta

    from django.utils import timezone

    user, session = small_window
    settings.HERMES = {**settings.HERMES, "IDLE_COMPACTION_SECONDS": 600,
                       "PRUNE_ON_COLD_RESUME": False}
    for n in range(4):
        chat(user, session, f"please read big.txt, round {n}")
    before = RunEvent.objects.filter(session=session, type="compaction").count()
    Message.objects.filter(session=session).update(
        created_at=timezone.now() - timedelta(hours=2))
    chat(user, session, "back again")
    assert RunEvent.objects.filter(session=session, type="compaction",
                                   payload__reason="idle").count() == 1
    assert RunEvent.objects.filter(session=session, type="compaction").count() == before + 1


def test_micro_compaction_archives_what_it_folds_so_resume_never_double_loads(
        small_window, settings):
    from agents.context.compaction import double_loaded
    from sessions.transcript import history_load

    user, session = small_window
    settings.HERMES = {**settings.HERMES, "MICRO_COMPACTION": True}
    for n in range(5):
        assert chat(user, session, f"please read big.txt, round {n}").status == "completed"
    micro = RunEvent.objects.filter(session=session, type="compaction", payload__kind="micro")
    assert micro.count() >= 2
    live = history_load(session=session)  # exactly what a resumed worker loads
    assert double_loaded(live) == []
    rolling = [m for m in live if m.content.startswith("[ROLLING SUMMARY")]
    assert len(rolling) == 1 and live[0] is rolling[0]
    # What was folded is archived (findable, not replayed), not deleted.
    assert Message.objects.filter(session=session, active=False, compacted=True,
                                  content__contains="round 0").exists()
    assert not any("round 0" in m.content for m in live[1:])
