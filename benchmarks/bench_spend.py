"""Spend-view benchmark on PostgreSQL: /spend/ response time over 1,000,000 UsageRecords.

Issue 9, "Measured": ``/spend/`` p95 under 300 ms over 1,000,000 rows. The rows are
bulk-inserted with COPY into a throwaway database made by Django's test utilities
(``test_<name>`` of DATABASE_URL, default postgres://postgres@127.0.0.1:5432/hermes_bench_spend),
migrated, ANALYZEd, and dropped at the end. The shape: 20 teams × 10 members = 200 users,
10 sessions each, calls spread over the last 120 days (2% of unknown cost), so a user holds
about 5,000 rows (1,250 in the default 30-day window) and a team about 50,000.

Timed through Django's test client (URL routing, middleware, every query, template and the
pygal chart), after warm-up requests:

- a member's own /spend/ (default range: last 30 days),
- a team admin's /spend/?team=<id> (members table included),
- the same team over a 120-day range,
- staff looking at one team,
- the members CSV,
- and, for context, /settings/ (a page with no usage query) on the same host.

Run: ``python benchmarks/bench_spend.py`` (``make bench-spend``); ``--rows N`` for a quick
look. Not a test: it measures, and exits 1 when a target fails.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/hermes_bench_spend"
os.environ["DATABASE_URL"] = os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_web.settings")

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402
from django.utils import timezone  # noqa: E402

from accounts.models import Membership, Team  # noqa: E402
from benchmarks.common import percentile  # noqa: E402
from sessions.models import Session  # noqa: E402

P95_LIMIT_MS = 300.0
TEAMS = 20
MEMBERS = 10
SESSIONS_PER_USER = 10
DAYS = 120
REQUESTS = 40
WARMUP = 5
COLUMNS = ("session_id", "turn_id", "user_id", "team_id", "provider", "model", "purpose",
           "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_5m_tokens",
           "cache_write_1h_tokens", "reasoning_tokens", "cost_usd", "rate_source",
           "cost_unknown_reason", "cost_flagged", "cost_input_usd", "cost_output_usd",
           "cost_cache_read_usd", "cost_cache_write_usd", "cost_uncached_usd", "raw",
           "created_at")
MODELS = [("anthropic", "claude-sonnet-4-5", Decimal(3), Decimal(15)),
          ("anthropic", "claude-haiku-4-5", Decimal(1), Decimal(5)),
          ("openai", "gpt-4.1", Decimal(2), Decimal(8))]


def populate(rows: int) -> tuple[list, list[Team]]:
    """Users, teams, sessions, then ``rows`` UsageRecords by COPY. Returns (users, teams)."""
    user_model = get_user_model()
    teams = Team.objects.bulk_create([Team(name=f"team-{t}") for t in range(TEAMS)])
    # bulk_create: no password hashing for 200 users (they log in with force_login)
    created = user_model.objects.bulk_create([
        user_model(username=f"u{t}-{m}", password="!") for t in range(TEAMS)
        for m in range(MEMBERS)])
    users = [(u, teams[i // MEMBERS]) for i, u in enumerate(created)]
    Membership.objects.bulk_create([
        Membership(user=u, team=team, role="admin" if i % MEMBERS == 0 else "member")
        for i, (u, team) in enumerate(users)])
    rows_s = Session.objects.bulk_create([
        Session(owner=u, team=team, title=f"s{s}", provider="anthropic",
                model="claude-sonnet-4-5")
        for u, team in users for s in range(SESSIONS_PER_USER)])
    sessions = [(row, row.owner, teams[i // (MEMBERS * SESSIONS_PER_USER)])
                for i, row in enumerate(rows_s)]
    rng = random.Random(9)
    now = timezone.now()
    started = time.perf_counter()
    with connection.cursor() as cursor:
        copy_sql = (f"COPY agent_sessions_usagerecord ({', '.join(COLUMNS)}) FROM STDIN")
        with cursor.cursor.copy(copy_sql) as copy:
            for n in range(rows):
                session, user, team = sessions[n % len(sessions)]
                provider, model, rate_in, rate_out = MODELS[n % len(MODELS)]
                inp, out = rng.randint(0, 3_000), rng.randint(10, 2_000)
                read, w5, w1 = rng.randint(0, 60_000), rng.randint(0, 4_000), 0
                unknown = n % 50 == 0
                c_in = Decimal(inp) * rate_in / 1_000_000
                c_out = Decimal(out) * rate_out / 1_000_000
                c_read = Decimal(read) * rate_in / 10 / 1_000_000
                c_write = Decimal(w5) * rate_in * Decimal("1.25") / 1_000_000
                total = c_in + c_out + c_read + c_write
                uncached = Decimal(inp + read + w5) * rate_in / 1_000_000 + c_out
                at = now - timedelta(seconds=rng.randint(0, DAYS * 86_400))
                copy.write_row((
                    session.pk, None, user.pk, team.pk, provider, model, "turn", inp, out, read,
                    w5, w1, 0, None if unknown else total,
                    "" if unknown else f"genai-prices 0.2.3 {provider}/{model}",
                    "no rate for x" if unknown else "", False,
                    *((None,) * 5 if unknown else (c_in, c_out, c_read, c_write, uncached)),
                    "{}", at))
    # What autovacuum does on a live table: statistics and the visibility map (index-only
    # scans need the latter).
    connection.cursor().execute("VACUUM ANALYZE agent_sessions_usagerecord")
    print(f"inserted {rows:,} usage rows by COPY in {time.perf_counter() - started:.1f} s")
    return users, teams


def timed(client: Client, url: str) -> tuple[float, float]:
    """(p50 ms, p95 ms) of GET ``url`` after warm-up; every answer must be 200."""
    for _ in range(WARMUP):
        assert client.get(url).status_code == 200, url
    samples = []
    for _ in range(REQUESTS):
        started = time.perf_counter()
        response = client.get(url)
        samples.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    return percentile(samples, 50), percentile(samples, 95)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args(argv)
    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    print(f"database {connection.settings_dict['NAME']} (created and migrated; dropped at the end)")
    results = []
    try:
        users, teams = populate(args.rows)
        member, team = users[1]
        admin = users[0][0]
        staff = get_user_model().objects.create_user(username="staff", password="x",
                                                     is_staff=True)
        today = timezone.now().date()
        wide = f"start={today - timedelta(days=DAYS - 1)}&end={today}"
        cases = [("member /spend/ (30 days)", member, "/spend/"),
                 ("team admin /spend/?team (30 days)", admin, f"/spend/?team={team.pk}"),
                 (f"team admin /spend/?team ({DAYS} days)", admin,
                  f"/spend/?team={team.pk}&{wide}"),
                 ("staff /spend/?team (30 days)", staff, f"/spend/?team={teams[-1].pk}"),
                 ("team members CSV (30 days)", admin, f"/spend/teams/{team.pk}/members.csv"),
                 ("baseline: /settings/ (no usage query)", member, "/settings/")]
        for label, user, url in cases:
            client = Client()
            client.force_login(user, backend="django.contrib.auth.backends.ModelBackend")
            p50, p95 = timed(client, url)
            results.append((label, p50, p95))
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
    print(f"\n{'view':<40}{'p50 ms':>10}{'p95 ms':>10}  target p95 < {P95_LIMIT_MS:.0f} ms")
    ok = True
    for label, p50, p95 in results:
        if label.startswith("baseline"):  # what any page costs on this host right now
            print(f"{label:<40}{p50:>10.1f}{p95:>10.1f}  (context, no target)")
            continue
        passed = p95 < P95_LIMIT_MS
        ok &= passed
        print(f"{label:<40}{p50:>10.1f}{p95:>10.1f}  {'PASS' if passed else 'FAIL'}")
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"\nrows: {args.rows:,}; {TEAMS} teams x {MEMBERS} members, {SESSIONS_PER_USER} "
          f"sessions each, over {DAYS} days")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
