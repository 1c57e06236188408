"""Recall: full-text search over every message of a user's sessions (DESIGN.md §3).

PostgreSQL queries the tsvector side table; SQLite the FTS5 table (migration 0002). User
text is never passed as query syntax: PostgreSQL gets it through plainto_tsquery (every word
a plain term), SQLite gets each word quoted as a phrase. Rewound rows (active=0,
compacted=0) are never found; summarised-away rows (compacted=1) are. No model calls.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.db import connection

from sessions.models import Message, Session, Turn

MAX_QUERY_CHARS = 500
_START, _STOP = "\ue000", "\ue001"
"""Private-use characters the database marks matches with; ``_marked`` turns them into « ».
Marking with « » directly marked twice when the text itself held « » (a session_search
result quoting an earlier snippet gave «<mark>«README»</mark>»)."""
_OWN_MARKS = str.maketrans({"«": "‹", "»": "›", _START: "", _STOP: ""})
WINDOW = 5
"""Messages either side of a hit returned by the session_search tool (hermes-facts §5)."""
RECALL_TOOL = "session_search"
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchHit:
    """One matching message: ids, role, the session title, and a snippet with each match
    marked once «like this» (« » in the message text itself show as ‹ ›)."""

    message_id: int
    session_id: int
    session_title: str
    role: str
    snippet: str
    active: bool


def _fts5_query(text: str) -> str:
    """Each word quoted, implicitly ANDed: FTS5 operators in user text stay plain words."""
    words = _WORD.findall(text)[:20]
    return " ".join('"' + w.replace('"', "") + '"' for w in words)


def message_search(*, user, query: str, limit: int = 20,
                   session_ids: list[int] | None = None) -> list[SearchHit]:
    """Messages of ``user``'s sessions matching every word of ``query``, newest first.

    ``session_ids`` narrows to those sessions (still owned by the user). Returns [] for a
    query with no words. Query length is capped at 500 chars.
    """
    query = (query or "")[:MAX_QUERY_CHARS]
    if not _WORD.search(query):
        return []
    params: list = []
    if connection.vendor == "postgresql":
        sql = """
            SELECT m.id, m.session_id, s.title, m.role,
                   ts_headline('simple', m.content, q, %s),
                   m.active
            FROM agent_sessions_message_search ms
            JOIN agent_sessions_message m ON m.id = ms.message_id
            JOIN agent_sessions_session s ON s.id = m.session_id,
                 plainto_tsquery('simple', %s) q
            WHERE ms.owner_id = %s AND ms.tsv @@ q AND (m.active OR m.compacted)"""
        params = [f"StartSel={_START},StopSel={_STOP},MaxWords=24,MinWords=6,MaxFragments=2",
                  query, user.pk]
        # The side table's own owner and id: ordered by its (owner_id, message_id) index.
        order = " ORDER BY ms.message_id DESC LIMIT %s"
    else:
        sql = """
            SELECT m.id, m.session_id, s.title, m.role,
                   snippet(agent_sessions_message_fts, 0, %s, %s, '…', 16), m.active
            FROM agent_sessions_message_fts
            JOIN agent_sessions_message m ON m.id = agent_sessions_message_fts.rowid
            JOIN agent_sessions_session s ON s.id = m.session_id
            WHERE agent_sessions_message_fts MATCH %s AND s.owner_id = %s
              AND (m.active OR m.compacted)"""
        fts = _fts5_query(query)
        if not fts:
            return []
        params = [_START, _STOP, fts, user.pk]
        order = " ORDER BY m.id DESC LIMIT %s"
    if session_ids is not None:
        if not session_ids:
            return []
        sql += " AND m.session_id IN (" + ",".join(["%s"] * len(session_ids)) + ")"
        params += list(session_ids)
    sql += order
    params.append(limit)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return [SearchHit(message_id=r[0], session_id=r[1], session_title=r[2], role=r[3],
                      snippet=_marked(r[4] or ""), active=bool(r[5])) for r in rows]


def _marked(excerpt: str) -> str:
    """The database excerpt with each match in « » exactly once: guillemets already in the
    text become ‹ › first, so every « » pair left is a match mark."""
    parts = excerpt.split(_START)
    out = [parts[0].translate(_OWN_MARKS)]
    for part in parts[1:]:
        match, _, rest = part.partition(_STOP)
        out.append("«" + match.translate(_OWN_MARKS) + "»" + rest.translate(_OWN_MARKS))
    return "".join(out)


def session_search_for_tool(*, session: Session, query: str, limit: int = 5) -> list[dict]:
    """The session_search tool's data: hits over the owner's sessions, deduplicated by
    conversation lineage (one hit per lineage, the newest), each with a window of ±5
    messages (live or summarised-away, never rewound) around it. Archived rows of the
    current session are findable; the turn in progress and earlier session_search calls and
    results are not (echoes of the query). Returns plain dicts (agents/tools/recall.py
    formats them).
    """
    hits = message_search(user=session.owner, query=query, limit=limit * 10)
    # Echoes are not recall: the turn in progress (the model already sees it, and its own
    # session_search call holds the query) and earlier session_search calls and results.
    # Left in, the newest-per-lineage dedupe would pick the echo over the real hit.
    current = (Turn.objects.filter(session=session, status=Turn.Status.RUNNING)
               .exclude(user_message=None).order_by("-id")
               .values_list("user_message_id", flat=True).first())
    echoes = {pk for pk, tool_name, calls in Message.objects.filter(
        pk__in=[h.message_id for h in hits]).values_list("pk", "tool_name", "tool_calls")
        if tool_name == RECALL_TOOL
        or any(c.get("name") == RECALL_TOOL for c in calls or ())}
    hits = [h for h in hits if h.message_id not in echoes
            and not (current and h.session_id == session.pk and h.message_id >= current)]
    seen: set[int] = set()
    out: list[dict] = []
    lineage = dict(Session.objects.filter(pk__in={h.session_id for h in hits})
                   .values_list("pk", "lineage_root_id"))
    for hit in hits:
        root = lineage.get(hit.session_id) or hit.session_id
        if root in seen:
            continue
        seen.add(root)
        visible = Message.objects.filter(session_id=hit.session_id).exclude(
            active=False, compacted=False)
        before = list(visible.filter(id__lt=hit.message_id).order_by("-id")[:WINDOW])[::-1]
        after = list(visible.filter(id__gt=hit.message_id).order_by("id")[:WINDOW])
        window = [{"id": m.id, "role": m.role, "text": m.content[:400],
                   "archived": not m.active} for m in (*before, *after)]
        out.append({"session_id": hit.session_id, "title": hit.session_title,
                    "message_id": hit.message_id, "role": hit.role, "snippet": hit.snippet,
                    "archived": not hit.active,
                    "current_session": hit.session_id == session.pk, "window": window})
        if len(out) >= limit:
            break
    return out
