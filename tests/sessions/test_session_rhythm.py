"""sessions/context.py session_rhythm: the idle gaps and model calls read from rows in one
query when the session has finished turns, and the history's tokens and cold-prune reclaim
from the per-session tally (equal to the full computation)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from agents.cache_strategy import long_gaps
from agents.context.prune import plan_prune
from agents.context.tokens import estimate_message_tokens
from agents.messages import Message as AgentMessage
from sessions.context import session_rhythm
from sessions.models import Turn, UsageRecord
from sessions.services import session_create

pytestmark = pytest.mark.django_db


def history(n: int) -> list[AgentMessage]:
    out = []
    for i in range(n):
        out.append(AgentMessage(role="user", content=f"question {i}", id=3 * i + 1))
        out.append(AgentMessage(role="tool", content="x" * 2_500, tool_call_id=f"c{i}",
                                id=3 * i + 2))
        out.append(AgentMessage(role="assistant", content="answer", id=3 * i + 3))
    return out


def test_rhythm_reads_gaps_and_calls_in_one_query(make_user, django_assert_num_queries):
    user = make_user("rhea")
    session = session_create(user=user)
    start = timezone.now() - timedelta(hours=3)
    for k, gap in enumerate((0, 600, 7200)):  # turns finished 1 min after they began
        created = start + timedelta(seconds=gap + 60 * k)
        turn = Turn.objects.create(session=session, input_text="x",
                                   status=Turn.Status.COMPLETED, finished_at=created
                                   + timedelta(seconds=60))
        Turn.objects.filter(pk=turn.pk).update(created_at=created)
        for purpose in ("turn", "turn", "summary"):
            UsageRecord.objects.create(session=session, turn=turn, user=user, purpose=purpose,
                                       provider="simulator", model="sim",
                                       created_at=timezone.now())
    live = history(12)
    with django_assert_num_queries(1):
        rhythm = session_rhythm(session, idle_seconds=30.0, history=live, prompt_tokens=100)
    assert rhythm.gaps_s[-1] == 30.0 and len(rhythm.gaps_s) == 3
    assert rhythm.gaps_s[:2] == pytest.approx((600.0, 6600.0))
    bursts = 1 + len(long_gaps(rhythm.gaps_s)) + sum(1 for g in rhythm.gaps_s if g > 3600)
    assert bursts >= 2 and rhythm.burst_requests == 6 / bursts  # "turn" calls only
    plan = plan_prune(tuple(live), estimate=estimate_message_tokens, trigger_tokens=0,
                      rearm_level=0, cold=True)
    assert rhythm.prunable_tokens == plan.reclaimed > 0
    assert rhythm.history_tokens == sum(estimate_message_tokens(m) for m in live)
    grown = [*live, *history(14)[36:]]  # the next turn: appended messages only
    again = session_rhythm(session, idle_seconds=30.0, history=grown, prompt_tokens=100)
    plan = plan_prune(tuple(grown), estimate=estimate_message_tokens, trigger_tokens=0,
                      rearm_level=0, cold=True)
    assert again.prunable_tokens == plan.reclaimed


def test_rhythm_without_finished_turns_still_counts_calls(make_user):
    user = make_user("rhys")
    session = session_create(user=user)
    turn = Turn.objects.create(session=session, input_text="x", status=Turn.Status.RUNNING)
    UsageRecord.objects.create(session=session, turn=turn, user=user, provider="simulator",
                               model="sim", created_at=timezone.now())
    rhythm = session_rhythm(session, idle_seconds=5.0, history=[], prompt_tokens=10)
    assert rhythm.gaps_s == () and rhythm.burst_requests == 1.0
    assert rhythm.prunable_tokens == 0 and rhythm.history_tokens == 0
