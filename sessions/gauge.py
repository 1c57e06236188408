"""Selector for the context gauge in the chat header (issue 14 item 4).

Reads the rows the next request is built from (stored system prompt, pinned tool snapshot,
live messages, the calibration anchor on the session) and hands the counts to the pure
arithmetic in agents/gauge.py. The threshold is the runner's own (sessions/runner.py
TurnContext.threshold: agents/context/compaction.py compaction_threshold of the profile's window),
and the anchor is used only when its fingerprint still matches the live prefix, exactly as
Calibrator.from_dict decides for a turn. Nothing is written.

The rough parts are estimated per piece (system text, tool schemas, each message with its
envelope) rather than over the exact wire payload, so a reading can differ from the
runner's payload estimate by a few tokens per message; the calibrated projection removes
most of that difference once a billed anchor exists.
"""

from __future__ import annotations

import json

from agents.context.compaction import compaction_threshold
from agents.gauge import ContextGauge, context_gauge
from agents.context.tokens import UsageAnchor, estimate_message_tokens, estimate_text_tokens, \
    prefix_fingerprint
from sessions import toolbox
from sessions.models import RunEvent, Session
from sessions.rendering import notice_text
from sessions.runner import provider_profile
from sessions.transcript import history_load

GAUGE_EVENTS = ("compaction", "prune")
"""Event types shown on the gauge as marks (context reductions)."""


def session_context_gauge(*, session: Session) -> ContextGauge:
    """The gauge for ``session``'s next request (tokens; see agents/gauge.py)."""
    profile = provider_profile(session)
    names = session.tool_names or list(toolbox.tool_names_for(session))
    tools = toolbox.registry_for(session).specs(names)
    schemas = json.dumps([[t.name, t.description, t.input_schema] for t in tools],
                         ensure_ascii=False, separators=(",", ":"))
    family = profile.tokenizer_family
    floor = estimate_text_tokens(session.system_prompt, family) + estimate_text_tokens(
        schemas, family)
    live = history_load(session=session)
    history = sum(estimate_message_tokens(m) for m in live)
    anchor = None
    raw = (session.usage_anchor or {}).get("anchor")
    if raw and session.system_prompt:
        candidate = UsageAnchor.from_dict(raw)
        if candidate.message_count <= len(live) and prefix_fingerprint(
                system=session.system_prompt, tools=tools,
                messages=live[:candidate.message_count]) == candidate.fingerprint:
            anchor = candidate
    return context_gauge(floor=floor, history=history, anchor=anchor,
                         threshold=compaction_threshold(profile.context_window),
                         window=profile.context_window)


def gauge_events(*, session: Session, limit: int = 10) -> list[dict]:
    """The latest context reductions, newest first: {"type", "at", "text"}."""
    rows = (RunEvent.objects.filter(session=session, type__in=GAUGE_EVENTS)
            .order_by("-seq")[:limit])
    return [{"type": r.type, "at": r.created_at, "text": notice_text(r.type, r.payload)}
            for r in rows]
