"""Spend selectors: what a user, a team or a member spent, from UsageRecord (USD, tokens).

Every figure sums the cost columns priced at write time (accounts/pricing.py); rows of
unknown cost are never summed as $0, they are counted separately with their reasons. Days
and months are UTC (agents/spend_caps.py). Who may see what: a user their own usage; a team
admin their team's and its members'; staff every team (``spend_teams``).

Each aggregate is one grouped query over the (user|team, created_at) indexes, so /spend/
stays fast over a million rows (benchmarks/bench_spend.py).

What a team spent (``team_usage``) is the ONE definition the team's cap (accounts/budgets.py
``budget_spent``) and every team figure on /spend/ (periods, chart, by session and model,
the members table and CSV) share: the usage of the team's sessions, plus the usage of the
sessions of no team owned by its current members (see ``team_usage``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal

from django.db.models import Count, F, Q, QuerySet, Subquery, Sum
from django.db.models.functions import TruncDate

from accounts.models import Membership, Team
from agents.spend_caps import period_start
from sessions.models import Session, UsageRecord

MAX_RANGE_DAYS = 366
"""The longest date range /spend/ accepts (longer is a form error)."""

ZERO = Decimal(0)
TOKEN_SUMS = {"input": Sum("input_tokens"), "output": Sum("output_tokens"),
              "cache_read": Sum("cache_read_tokens"), "cache_write_5m": Sum("cache_write_5m_tokens"),
              "cache_write_1h": Sum("cache_write_1h_tokens")}
DOLLAR_SUMS = {"usd": Sum("cost_usd"), "usd_input": Sum("cost_input_usd"),
               "usd_output": Sum("cost_output_usd"), "usd_cache_read": Sum("cost_cache_read_usd"),
               "usd_cache_write": Sum("cost_cache_write_usd"), "usd_uncached": Sum("cost_uncached_usd")}


@dataclass(frozen=True)
class DateRange:
    """[start, end] inclusive UTC dates."""

    start: date
    end: date

    @property
    def since(self) -> datetime:
        return datetime.combine(self.start, time.min, tzinfo=timezone.utc)

    @property
    def until(self) -> datetime:
        return datetime.combine(self.end + timedelta(days=1), time.min, tzinfo=timezone.utc)

    def days(self) -> list[date]:
        return [self.start + timedelta(days=i) for i in range((self.end - self.start).days + 1)]


def range_validate(start: date, end: date) -> DateRange:
    """A date range a person asked for. Raises ValueError for a reversed range or one longer
    than MAX_RANGE_DAYS."""
    if end < start:
        raise ValueError("the end date is before the start date")
    if (end - start).days + 1 > MAX_RANGE_DAYS:
        raise ValueError(f"a range can span at most {MAX_RANGE_DAYS} days")
    return DateRange(start, end)


def range_default(now: datetime) -> DateRange:
    """The last 30 days, today included."""
    today = now.astimezone(timezone.utc).date()
    return DateRange(today - timedelta(days=29), today)


def spend_teams(*, user) -> QuerySet[Team]:
    """Teams whose spend ``user`` may see: staff all, a team admin theirs."""
    if user.is_staff:
        return Team.objects.order_by("name")
    return Team.objects.filter(memberships__user=user,
                               memberships__role=Membership.Role.ADMIN).order_by("name")


def team_usage(team_id: int) -> Q:
    """The UsageRecord rows that count toward team ``team_id``'s spend: those of its sessions
    (``team_id`` set to it), and those of sessions of NO team whose owner (the record's
    ``user``) is a member of the team now.

    Why: a teamless session is bound by the caps of every team its owner belongs to, as it is
    by their admin-only risk classes (accounts/teams.py ``team_rules``), or a capped member
    could spend without limit by starting a personal session (or one made before joining).
    So its spend counts toward each of those teams, and a team's displayed total is the
    figure its cap was checked against. A session that has a team counts toward that team
    only. Membership is read as it is now, like the approval rule: a member who joins brings
    the period's teamless spend with them (the cap binds at once: fail closed), one who is
    removed takes it away. Rows of a session of no team whose owner was deleted (``user``
    NULL) count toward no team."""
    members = Membership.objects.filter(team_id=team_id).values("user_id")
    return Q(team_id=team_id) | Q(team_id__isnull=True, user_id__in=Subquery(members))


def usage_scope(*, user=None, team: Team | None = None, member=None) -> QuerySet[UsageRecord]:
    """Usage rows of one user, of one team (``team_usage``: its sessions and its members'
    sessions of no team), or of one member within one team."""
    rows = UsageRecord.objects.all()
    if team is not None:
        rows = rows.filter(team_usage(team.pk))
        if member is not None:
            rows = rows.filter(user=member)
        return rows
    return rows.filter(user=user)


def spend_periods(rows: QuerySet[UsageRecord], *, now: datetime) -> dict[str, Decimal]:
    """USD today, last 7 days, last 30 days and this month (UTC), in one query."""
    today = period_start("day", now)
    starts = {"today": today, "last_7_days": today - timedelta(days=6),
              "last_30_days": today - timedelta(days=29), "this_month": period_start("month", now)}
    earliest = min(starts.values())
    sums = rows.filter(created_at__gte=earliest).aggregate(**{
        name: Sum("cost_usd", filter=Q(created_at__gte=start)) for name, start in starts.items()})
    return {name: sums[name] or ZERO for name in starts}


def spend_breakdown(rows: QuerySet[UsageRecord], window: DateRange) -> tuple[dict, list[dict]]:
    """One grouped query over ``window`` (by provider, model and unknown reason), folded into
    (summary, by_model). Summary: calls, the four buckets in tokens and dollars, cache savings
    (uncached equivalent minus actual, USD), hit ratio (cache-read share of prompt tokens),
    the calls of unknown cost by reason. By model: USD, calls, unknown calls, tokens per
    (provider, model), dearest first."""
    groups = list(rows.filter(created_at__gte=window.since, created_at__lt=window.until)
                  .values("provider", "model", "cost_unknown_reason")
                  .annotate(calls=Count("id"), unknown=Count("id", filter=Q(cost_usd__isnull=True)),
                            **TOKEN_SUMS, **DOLLAR_SUMS).order_by())
    totals: dict = {key: 0 for key in ("calls", *TOKEN_SUMS)}
    totals.update({key: ZERO for key in DOLLAR_SUMS})
    unknown: dict[str, int] = {}
    models: dict[tuple[str, str], dict] = {}
    for g in groups:
        for key in ("calls", *TOKEN_SUMS):
            totals[key] += g[key] or 0
        for key in DOLLAR_SUMS:
            totals[key] += g[key] or ZERO
        if g["unknown"]:
            reason = g["cost_unknown_reason"] or "no rate"
            unknown[reason] = unknown.get(reason, 0) + g["unknown"]
        m = models.setdefault((g["provider"], g["model"]), {
            "provider": g["provider"], "model": g["model"], "usd": None, "calls": 0,
            "unknown": 0, "tokens": 0})
        if g["usd"] is not None:
            m["usd"] = (m["usd"] or ZERO) + g["usd"]
        m["calls"] += g["calls"]
        m["unknown"] += g["unknown"]
        m["tokens"] += sum(g[k] or 0 for k in TOKEN_SUMS)
    prompt = (totals["input"] + totals["cache_read"] + totals["cache_write_5m"]
              + totals["cache_write_1h"])
    totals["prompt"] = prompt
    totals["cache_write"] = totals["cache_write_5m"] + totals["cache_write_1h"]
    totals["hit_ratio"] = (totals["cache_read"] / prompt) if prompt else 0.0
    totals["savings"] = totals["usd_uncached"] - totals["usd"]
    totals["unknown"] = [{"cost_unknown_reason": r, "calls": n}
                         for r, n in sorted(unknown.items(), key=lambda kv: -kv[1])]
    totals["unknown_calls"] = sum(unknown.values())
    by_model = sorted(models.values(), key=lambda m: m["usd"] or ZERO, reverse=True)
    return totals, by_model


def spend_by_day(rows: QuerySet[UsageRecord], window: DateRange) -> list[tuple[date, Decimal]]:
    """USD per UTC day over the window, every day present (0 when nothing was spent)."""
    per_day = {r["day"]: r["usd"] or ZERO for r in rows.filter(
        created_at__gte=window.since, created_at__lt=window.until)
        .annotate(day=TruncDate("created_at", tzinfo=timezone.utc)).values("day")
        .annotate(usd=Sum("cost_usd")).order_by()}
    return [(day, per_day.get(day, ZERO)) for day in window.days()]


def spend_by(rows: QuerySet[UsageRecord], window: DateRange, *fields: str,
             limit: int = 50) -> list[dict]:
    """USD, calls and tokens grouped by ``fields`` (e.g. "model", "provider", "session"),
    dearest first, at most ``limit`` groups."""
    return list(rows.filter(created_at__gte=window.since, created_at__lt=window.until)
                .values(*fields).annotate(usd=Sum("cost_usd"), calls=Count("id"),
                                          unknown=Count("id", filter=Q(cost_usd__isnull=True)),
                                          tokens=Sum(F("input_tokens") + F("output_tokens")
                                                     + F("cache_read_tokens")
                                                     + F("cache_write_5m_tokens")
                                                     + F("cache_write_1h_tokens")))
                .order_by(F("usd").desc(nulls_last=True))[:limit])


def spend_by_provider(by_model: list[dict]) -> list[dict]:
    """``spend_by(..., "provider", "model")`` rolled up by provider (no second query)."""
    out: dict[str, dict] = {}
    for g in by_model:
        row = out.setdefault(g["provider"], {"provider": g["provider"], "usd": None, "calls": 0,
                                             "unknown": 0, "tokens": 0})
        if g["usd"] is not None:
            row["usd"] = (row["usd"] or ZERO) + g["usd"]
        row["calls"] += g["calls"]
        row["unknown"] += g["unknown"]
        row["tokens"] += g["tokens"] or 0
    return sorted(out.values(), key=lambda r: r["usd"] or ZERO, reverse=True)


DELETED_SESSIONS = "Deleted sessions"
"""The /spend/ row that sums the usage of sessions deleted since (sessions/services.py
session_delete keeps their usage rows)."""


def spend_by_session(rows: QuerySet[UsageRecord], window: DateRange, limit: int = 50) -> list[dict]:
    """``spend_by`` session, with each session's title. The usage of deleted sessions
    (``session`` NULL: the money stays spent) is one group, "Deleted sessions"."""
    groups = spend_by(rows, window, "session", limit=limit)
    titles = dict(Session.objects.filter(pk__in=[g["session"] for g in groups])
                  .values_list("pk", "title"))
    return [{**g, "title": titles.get(g["session"], "") if g["session"] is not None
             else DELETED_SESSIONS} for g in groups]



MEMBER_SORTS = {"spend": "-usd", "-spend": "usd", "name": "username", "-name": "-username",
                "calls": "-calls"}


def spend_members(team: Team, window: DateRange, *, sort: str = "spend") -> list[dict]:
    """One row per member of ``team`` (members with no usage included at $0): username,
    role, USD, calls, unknown-cost calls; sorted by ``sort`` (MEMBER_SORTS)."""
    usage = {g["user"]: g for g in spend_by(usage_scope(team=team), window, "user",
                                            limit=10_000)}
    rows = []
    for m in Membership.objects.filter(team=team).select_related("user"):
        g = usage.get(m.user_id, {})
        rows.append({"user_id": m.user_id, "username": m.user.username, "role": m.role,
                     "usd": g.get("usd") or ZERO, "calls": g.get("calls", 0),
                     "unknown": g.get("unknown", 0), "tokens": g.get("tokens") or 0})
    key = MEMBER_SORTS.get(sort, "-usd")
    reverse = key.startswith("-")
    rows.sort(key=lambda r: r[key.lstrip("-")], reverse=reverse)
    return rows


def session_costs(session_ids: list[int]) -> dict[int, dict]:
    """Per session: {"usd": known total, "unknown": calls of unknown cost}."""
    return {g["session"]: {"usd": g["usd"] or ZERO, "unknown": g["unknown"]}
            for g in UsageRecord.objects.filter(session_id__in=session_ids).values("session")
            .annotate(usd=Sum("cost_usd"),
                      unknown=Count("id", filter=Q(cost_usd__isnull=True))).order_by()}


def sessions_with_cost(sessions: QuerySet[Session]) -> QuerySet[Session]:
    """``sessions`` annotated with ``cost_total`` (USD of known-cost calls, None when no
    call) and ``cost_unknown`` (calls of unknown cost): the session list shows both."""
    return sessions.annotate(
        cost_total=Sum("usage_records__cost_usd"),
        cost_unknown=Count("usage_records", filter=Q(usage_records__cost_usd__isnull=True)))


def usage_export(session: Session) -> list[dict]:
    """The session's provider calls for its export: buckets (tokens), cost (USD string, None
    = unknown, with the reason), rate source and fetched-at, in call order."""
    return [{"id": r.pk, "turn_id": r.turn_id, "purpose": r.purpose, "provider": r.provider,
             "model": r.model, "created_at": r.created_at.isoformat(),
             "input_tokens": r.input_tokens, "output_tokens": r.output_tokens,
             "cache_read_tokens": r.cache_read_tokens,
             "cache_write_5m_tokens": r.cache_write_5m_tokens,
             "cache_write_1h_tokens": r.cache_write_1h_tokens,
             "reasoning_tokens": r.reasoning_tokens,
             "cost_usd": None if r.cost_usd is None else str(r.cost_usd),
             "cost_unknown_reason": r.cost_unknown_reason, "rate_source": r.rate_source,
             "rate_fetched_at": r.rate_fetched_at.isoformat() if r.rate_fetched_at else None}
            for r in session.usage_records.order_by("id")]
