"""Text deltas through a real turn: the simulator streams over HTTP, a real Celery worker
(thread pool, in-memory broker) runs the turn that a websocket "message" frame started, and
the frames the socket receives are checked against the stored events and messages.

What is pinned: the first delta of each reply is written (and reaches the socket) on its own,
at once, when HERMES["FIRST_DELTA_FLUSH"] is on; batched with the rest when off; and the
flush costs exactly one text.delta write per reply (a 10 s window makes the batching
deterministic: without the flush a reply is one text.delta, with it two). The deltas of a
reply add up to its stored message either way. The timing figures (what the flush buys in
time to first token, what the window costs) belong to benchmarks/bench_stream.py."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.utils import timezone
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator

from simulator.script import Reply, Script, ToolCallSpec
from accounts.budgets import budget_spent
from accounts.models import SpendReservation, Team
from accounts.services import budget_set
from agents.context.tokens import estimate_text_tokens
from sessions.models import Message, RunEvent, Turn, UsageRecord
from sessions.services import session_create
from tests.sessions.test_consumers import APPS, ORIGIN, application, cookie_for

pytestmark = pytest.mark.django_db(transaction=True, available_apps=APPS)

FIRST_REPLY = "alpha beta gamma delta epsilon zeta"
SECOND_REPLY = "eta theta iota kappa lambda"


@pytest.fixture(autouse=True)
def memory_layer(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]


@pytest.fixture
def alice(make_user, hermes_settings, simulator):
    hermes_settings.HERMES = {**hermes_settings.HERMES, "BACKEND": "local"}

    def policy(request):
        if request.tool_results:
            return Reply(text=SECOND_REPLY, token_delay=0.01)
        return Reply(text=FIRST_REPLY, token_delay=0.01, tool_calls=(
            ToolCallSpec(name="read_file", input={"path": "README.md"}),))

    simulator.state.script = Script(policy)
    return make_user("alice", team="blue")


def stream_a_turn(client, settings, user, *, window_ms: float, first_flush: bool
                  ) -> tuple[list[dict], object]:
    """Send a message over the socket (as the browser does), let the worker run the turn,
    and return every frame the socket received up to turn.finished, and the session."""
    settings.HERMES = {**settings.HERMES, "DELTA_BATCH_MS": window_ms,
                       "FIRST_DELTA_FLUSH": first_flush}
    session = session_create(user=user, title="streaming")
    cookie = cookie_for(client, user)

    async def scenario() -> list[dict]:
        ws = WebsocketCommunicator(application(), f"/ws/sessions/{session.pk}/",
                                   headers=[ORIGIN, (b"cookie", cookie)])
        assert (await ws.connect(timeout=10))[0]
        await ws.send_json_to({"type": "hello", "last_seq": 0})
        await ws.send_json_to({"type": "message", "text": "read the README, then answer"})
        frames: list[dict] = []
        while not frames or frames[-1].get("type") not in (
                "turn.finished", "turn.failed", "turn.cancelled"):
            frames.append(await ws.receive_json_from(timeout=30))
        await ws.disconnect()
        return frames

    return async_to_sync(scenario)(), session


def replies(frames: list[dict]) -> list[list[str]]:
    """The text.delta texts of each reply, in order (a reply ends at any other frame)."""
    out: list[list[str]] = []
    current: list[str] = []
    for frame in frames:
        if frame["type"] == "text.delta":
            current.append(frame["payload"]["text"])
        elif current:
            out.append(current)
            current = []
    return out + ([current] if current else [])


def check_turn(frames: list[dict], session) -> list[list[str]]:
    """The turn completed, every stored event reached the socket once in seq order, and
    each reply's deltas add up to its stored assistant message."""
    assert Turn.objects.get(session=session).status == Turn.Status.COMPLETED
    stored = list(RunEvent.objects.filter(session=session).order_by("seq")
                  .values_list("seq", "type"))
    assert [(f["seq"], f["type"]) for f in frames if "seq" in f] == stored
    texts = list(Message.objects.filter(session=session, role="assistant").order_by("id")
                 .values_list("content", flat=True))
    assert texts == [FIRST_REPLY, SECOND_REPLY]
    streamed = replies(frames)
    assert ["".join(r) for r in streamed] == texts
    return streamed


def test_the_first_delta_of_each_reply_reaches_the_socket_alone_and_at_once(
        client, settings, alice, worker):
    frames, session = stream_a_turn(client, settings, alice, window_ms=10_000,
                                    first_flush=True)
    streamed = check_turn(frames, session)
    # The first word of each reply went out alone, before the rest of the reply existed;
    # the 10 s window then gathered the rest into one write: two events per reply.
    assert streamed == [["alpha", FIRST_REPLY[len("alpha"):]],
                        ["eta", SECOND_REPLY[len("eta"):]]]


def test_without_the_flush_the_first_delta_waits_for_the_batch(client, settings, alice, worker):
    frames, session = stream_a_turn(client, settings, alice, window_ms=10_000,
                                    first_flush=False)
    streamed = check_turn(frames, session)
    # One write per reply: the flush above costs exactly one text.delta per reply.
    assert streamed == [[FIRST_REPLY], [SECOND_REPLY]]


def test_window_zero_writes_every_delta_and_loses_nothing(client, settings, alice, worker):
    frames, session = stream_a_turn(client, settings, alice, window_ms=0, first_flush=True)
    streamed = check_turn(frames, session)
    assert [len(r) for r in streamed] == [len(FIRST_REPLY.split()), len(SECOND_REPLY.split())]


# --- the text.delta write: the stop flag it reads, its relaxed commit ----------------------

def stop_polls(queries) -> int:
    """should_stop's own SELECTs among captured queries (the delta write's UPDATE reads the
    flag too, but is not a SELECT of the session row)."""
    return sum(1 for q in queries
               if q["sql"].lstrip().upper().startswith("SELECT") and "stop_requested" in q["sql"])


def test_should_stop_reads_the_flag_the_last_delta_write_returned_without_a_poll(
        settings, alice):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from sessions.models import Session
    from sessions.sink import DbSink

    settings.HERMES = {**settings.HERMES, "DELTA_BATCH_MS": 0}  # every delta is a write
    session = session_create(user=alice, title="stop flag")
    turn = Turn.objects.create(session=session, input_text="x", status=Turn.Status.RUNNING)
    sink = DbSink(session=session, turn=turn, owner="w")
    with CaptureQueriesContext(connection) as queries:
        sink.text_delta("one ")
        assert sink.should_stop() is False
        Session.objects.filter(pk=session.pk).update(stop_requested=True)  # Stop pressed
        assert sink.should_stop() is False  # the flag read 0 s ago is still fresh
        sink.text_delta("two ")  # this write reads the flag under its row lock
        assert sink.should_stop() is True
    assert stop_polls(queries.captured_queries) == 0
    assert list(RunEvent.objects.filter(session=session).order_by("seq")
                .values_list("type", "payload__text")) == [("text.delta", "one "),
                                                           ("text.delta", "two ")]
    # No delta written for longer than STOP_CHECK_SECONDS (a tool runs): it polls again.
    idle = DbSink(session=session, turn=turn, owner="w")
    with CaptureQueriesContext(connection) as queries:
        assert idle.should_stop() is True
    assert stop_polls(queries.captured_queries) == 1


def stop_mid_reply(client, settings, user, simulator, *, words: list[str]):
    """A real turn whose reply is ``words`` (10 ms a token, every delta written); the
    socket sends the stop frame after the fifth text.delta frame. Returns (frames up to
    turn.cancelled/…, session)."""
    settings.HERMES = {**settings.HERMES, "DELTA_BATCH_MS": 0, "FIRST_DELTA_FLUSH": True}
    simulator.state.script = Script(lambda request: Reply(text=" ".join(words),
                                                          token_delay=0.01))
    session = session_create(user=user, title="stop")
    cookie = cookie_for(client, user)

    async def scenario() -> list[dict]:
        ws = WebsocketCommunicator(application(), f"/ws/sessions/{session.pk}/",
                                   headers=[ORIGIN, (b"cookie", cookie)])
        assert (await ws.connect(timeout=10))[0]
        await ws.send_json_to({"type": "hello", "last_seq": 0})
        await ws.send_json_to({"type": "message", "text": "talk for a while"})
        frames: list[dict] = []
        while not frames or frames[-1].get("type") not in (
                "turn.finished", "turn.failed", "turn.cancelled"):
            frames.append(await ws.receive_json_from(timeout=30))
            if [f["type"] for f in frames].count("text.delta") == 5:
                await ws.send_json_to({"type": "stop"})
        await ws.disconnect()
        return frames

    return async_to_sync(scenario)(), session


def test_stop_pressed_while_text_streams_cancels_the_turn_mid_reply(client, settings, alice,
                                                                    simulator, worker):
    """Through a real turn: the socket's stop frame lands while the reply streams (every
    delta written), the turn ends cancelled before the reply is complete, and every frame
    the socket got is a stored event, once, in seq order."""
    words = [f"w{n}" for n in range(300)]
    frames, session = stop_mid_reply(client, settings, alice, simulator, words=words)
    assert Turn.objects.get(session=session).status == Turn.Status.CANCELLED
    streamed = "".join(f["payload"]["text"] for f in frames if f["type"] == "text.delta")
    assert streamed and len(streamed.split()) < len(words)
    stored = list(RunEvent.objects.filter(session=session).order_by("seq")
                  .values_list("seq", "type"))
    assert [(f["seq"], f["type"]) for f in frames if "seq" in f] == stored


def test_a_reply_stopped_mid_stream_is_billed_and_counts_against_the_cap(
        client, settings, alice, make_user, simulator, worker):
    """The provider bills a stopped stream (the input, and the output it generated): the
    stopped call gets its UsageRecord (input and cache as message_start reported them,
    output counted from the text shown), priced, in the turn's cost line, spent against the
    team's cap, with its reservation settled. Before, a stop recorded nothing: stopping
    every reply after its first words was spend no cap saw."""
    boss = make_user("boss", team="blue", role="admin")
    budget = budget_set(actor=boss, scope="team", team=Team.objects.get(name="blue"),
                        period="day", limit="5")
    words = [f"w{n}" for n in range(300)]
    frames, session = stop_mid_reply(client, settings, alice, simulator, words=words)
    turn = Turn.objects.get(session=session)
    assert turn.status == Turn.Status.CANCELLED
    shown = "".join(f["payload"]["text"] for f in frames if f["type"] == "text.delta")
    record = UsageRecord.objects.get(turn=turn)
    billed = simulator.state.requests[-1].usage  # what the simulator's message_start said
    assert (record.input_tokens, record.cache_read_tokens, record.cache_write_5m_tokens + record.cache_write_1h_tokens) == (
        billed["input_tokens"], billed["cache_read_input_tokens"],
        billed["cache_creation_input_tokens"])  # reported, not a guess
    assert record.input_tokens + record.cache_read_tokens + record.cache_write_5m_tokens > 0
    assert record.output_tokens == max(1, estimate_text_tokens(shown))
    assert record.estimated is False and record.raw.get("stopped") is True
    assert record.cost_usd is not None and record.cost_usd > 0
    assert budget_spent(budget, now=timezone.now()) == record.cost_usd
    assert not SpendReservation.objects.exists()
    usage = [f for f in frames if f["type"] == "usage"]
    assert len(usage) == 1 and Decimal(usage[0]["payload"]["cost_usd"]) == record.cost_usd
    # The text the user saw is kept, in the same write as its usage.
    kept = Message.objects.get(session=session, role="assistant")
    assert kept.content == shown and kept.kind == "stopped"
    # The cost line is drawn live with the turn's end, as for a finished turn.
    assert frames[-1]["type"] == "turn.cancelled"
    assert f'id="usage-{turn.pk}"' in frames[-1].get("html", "")
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert "stopped by you" in page  # a reload says why the sentence ends there


@pytest.mark.services
def test_a_delta_write_commits_relaxed_in_its_own_transaction_only(alice):
    """PostgreSQL: outside a transaction the delta write is committed with synchronous_commit
    off for that transaction alone (the connection's setting is untouched after it); inside
    a caller's transaction it never relaxes the caller's commit."""
    from django.db import connection, transaction

    from sessions.events import delta_append
    from sessions.models import Session

    assert connection.vendor == "postgresql", "services tests need DATABASE_URL"
    session = session_create(user=alice, title="relaxed")

    def setting() -> str:
        with connection.cursor() as cursor:
            cursor.execute("SHOW synchronous_commit")
            return cursor.fetchone()[0]

    before = setting()
    event, stop = delta_append(session_id=session.pk, turn_id=0, text="a")
    assert stop is False and setting() == before
    Session.objects.filter(pk=session.pk).update(stop_requested=True)
    with transaction.atomic():
        second, stop = delta_append(session_id=session.pk, turn_id=0, text="b")
        assert stop is True
        assert setting() == before  # the caller's transaction keeps its durability
    assert second.seq == event.seq + 1
    assert list(RunEvent.objects.filter(session=session, type="text.delta")
                .order_by("seq").values_list("payload__text", flat=True)) == ["a", "b"]
