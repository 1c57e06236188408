"""Context-management benchmark on PostgreSQL: compaction as a flag flip, recall at scale, and
the token estimator against the simulator's tokenizer.

Issue 4, "Tests and benchmark". Three measurements, one table with PASS/FAIL per target:

a) archive 10,000 live messages of one session in ONE compaction transaction through the
   real code path (``sessions.context.transcript_replace``: UPDATE active=0, compacted=1 and
   insert the new live set) in under 0.5 s, with zero archive writes to the search side
   table ``agent_sessions_message_search`` (pg_stat_user_tables before/after).
b) recall p95 under 100 ms over 1,000,000 generated messages (200 users x 20 sessions x 250
   messages, a Zipf-like vocabulary of 3,000 words plus 300 rare words) through
   ``sessions.search.message_search`` (user-scoped), mixing rare and common words.
c) estimator error (``agents.context.tokens``) against the simulator's billed counts
   (``simulator``) within +-20% after calibration, on English, Chinese, Japanese and
   code: the Calibrator is anchored on the billed count of one request and ``projected()``
   predicts the following requests as the same kind of content grows.

Runs on a throwaway database made by Django's test utilities (``test_<name>`` of
DATABASE_URL, default postgres://postgres@127.0.0.1:5432/hermes_bench_context), migrated,
and dropped at the end, so the 1M rows never outlive the run. Run:
``python benchmarks/bench_context.py`` (``make bench-context``); ``--messages N`` shrinks
part b for a quick look. Not a test: it measures, and exits 1 when a target fails.
"""

from __future__ import annotations

import argparse
import inspect
import itertools
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/hermes_bench_context"
os.environ["DATABASE_URL"] = os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_web.settings")

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.utils import timezone  # noqa: E402

from agents.context.compaction import Skip, compacted_transcript, plan_compaction  # noqa: E402
from agents.messages import Message as AgentMessage  # noqa: E402
from agents.messages import ModelRequest, ToolCall, tool_result  # noqa: E402
from agents.providers import PROFILES  # noqa: E402
from simulator.prefix import anthropic_blocks  # noqa: E402
from simulator.tokenizer import count_tokens  # noqa: E402
from agents.context.tokens import (Calibrator, estimate_message_tokens,  # noqa: E402
                           estimate_payload_tokens, estimate_text_tokens)
from agents.tools.registry import default_registry  # noqa: E402
from agents.transports.anthropic_messages import AnthropicTransport  # noqa: E402
from sessions.context import transcript_replace  # noqa: E402
from sessions.models import Message, Session  # noqa: E402
from sessions.search import message_search  # noqa: E402
from sessions.transcript import history_load  # noqa: E402

SIDE_TABLE = "agent_sessions_message_search"
MESSAGE_TABLE = "agent_sessions_message"
ARCHIVE_MESSAGES = 10_000
ARCHIVE_LIMIT_S = 0.5
SEARCH_P95_LIMIT_MS = 100.0
ESTIMATE_LIMIT = 0.20
USERS = 200
SESSIONS_PER_USER = 20
VOCABULARY = 3_000
RARE_WORDS = 300
RARE_EVERY = 997
"""Every 997th generated message carries one rare word (each rare word ~3 times in 1M)."""
QUERIES = 240
COPY_BATCH = 50_000
WARMUP_QUERIES = 20
TURN_OWNER = "bench-context"


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One line of the result table: what was measured, the figure, the limit, pass/fail."""

    target: str
    figure: str
    limit: str
    ok: bool


def _execute(sql: str, params: list | None = None) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params or [])
        return cursor.fetchall() if cursor.description else []


# --- a) compaction as a flag flip ------------------------------------------------------------

_MESSAGE_COLUMNS = ("session_id, role, content, sent_content, tool_calls, tool_call_id, "
                    "tool_name, is_error, reasoning, stable_prefix_chars, kind, active, "
                    "compacted, created_at")


def table_stats(table: str) -> tuple[int, int, int]:
    """(n_tup_ins, n_tup_upd, n_tup_del) of ``table`` as the statistics system sees it now."""
    _execute("SELECT pg_stat_clear_snapshot()")
    row = _execute("SELECT n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_user_tables "
                   "WHERE relname = %s", [table])
    return tuple(row[0]) if row else (0, 0, 0)


def stats_flushed(until: Callable[[], bool], timeout: float = 5.0) -> bool:
    """Force this backend's pending table counters out (they flush when it goes idle, at most
    once a second unless forced) and poll until ``until()`` holds. False on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        _execute("SELECT pg_stat_force_next_flush()")
        if until():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def archive_once(run: int) -> dict:
    """One session with ARCHIVE_MESSAGES live rows compacted in one transaction; returns the
    time and the statistics deltas."""
    user = get_user_model().objects.create_user(f"bench-archive-{run}")
    session = Session.objects.create(
        owner=user, provider="simulator", model="hermes-simulator", title="archive bench",
        lease_owner=TURN_OWNER, lease_expires_at=timezone.now() + timezone.timedelta(hours=1))
    _execute(f"""
        INSERT INTO {MESSAGE_TABLE} ({_MESSAGE_COLUMNS})
        SELECT %s, CASE WHEN mod(g, 2) = 1 THEN 'user' ELSE 'assistant' END,
               'step ' || g || ' of the long session: ' || md5(g::text) || ' ' || md5((-g)::text),
               NULL, '[]'::jsonb, '', '', false, '', NULL, '', true, false, now()
        FROM generate_series(1, %s) g""", [session.pk, ARCHIVE_MESSAGES])
    Session.objects.filter(pk=session.pk).update(message_count=ARCHIVE_MESSAGES)
    history = history_load(session=session)
    plan = plan_compaction(history, window=PROFILES["simulator"].context_window,
                           estimate=estimate_message_tokens, first_compaction=True)
    if isinstance(plan, Skip):
        raise RuntimeError("the archive bench's history should compact, got a Skip")
    new_live = compacted_transcript(plan, "Summary of the earlier steps: the session compacted.")
    _execute("ANALYZE " + MESSAGE_TABLE)
    side_rows = _execute(f"SELECT count(*) FROM {SIDE_TABLE}")[0][0]
    stats_flushed(lambda: table_stats(SIDE_TABLE)[0] >= side_rows)
    before_msg, before_side = table_stats(MESSAGE_TABLE), table_stats(SIDE_TABLE)

    started = time.perf_counter()
    with transaction.atomic():
        transcript_replace(session=session, turn_owner=TURN_OWNER, new_live=new_live)
    elapsed = time.perf_counter() - started

    flushed = stats_flushed(lambda: table_stats(MESSAGE_TABLE)[1] >= before_msg[1]
                            + ARCHIVE_MESSAGES)
    after_msg, after_side = table_stats(MESSAGE_TABLE), table_stats(SIDE_TABLE)
    out = {"elapsed": elapsed, "flushed": flushed, "new_live": len(new_live),
           "archived": Message.objects.filter(session=session, active=False,
                                              compacted=True).count(),
           "live": Message.objects.filter(session=session, active=True).count(),
           "d_msg": tuple(a - b for a, b in zip(after_msg, before_msg)),
           "d_side": tuple(a - b for a, b in zip(after_side, before_side)),
           "side_rows": (side_rows, _execute(f"SELECT count(*) FROM {SIDE_TABLE}")[0][0])}
    print(f"   run {run}: archived {out['archived']:,} rows (active=0, compacted=1) and inserted "
          f"{out['live']} new live rows (summary + tail) in {elapsed * 1000:.1f} ms")
    print(f"     pg_stat_user_tables ins/upd/del  {MESSAGE_TABLE}: before {before_msg} after "
          f"{after_msg} delta {out['d_msg']}")
    print(f"     pg_stat_user_tables ins/upd/del  {SIDE_TABLE}: before {before_side} after "
          f"{after_side} delta {out['d_side']}  (rows {side_rows:,} -> "
          f"{out['side_rows'][1]:,}; stats flushed: {flushed})")
    return out


def bench_archive(runs: int = 3) -> list[Row]:
    print(f"a) compaction of one session with {ARCHIVE_MESSAGES:,} live messages, one "
          f"transaction (sessions.context.transcript_replace), {runs} sessions")
    results = [archive_once(run) for run in range(1, runs + 1)]
    median = statistics.median(r["elapsed"] for r in results)
    writes = [(r["d_side"][0] - r["new_live"], r["d_side"][1], r["d_side"][2]) for r in results]
    worst = max(writes)
    return [
        Row(target=f"archive {ARCHIVE_MESSAGES:,} msgs in one compaction",
            figure=f"{median:.3f} s median of {runs} "
                   "(" + ", ".join(f"{r['elapsed']:.3f}" for r in results) + ")",
            limit=f"< {ARCHIVE_LIMIT_S} s",
            ok=median < ARCHIVE_LIMIT_S
            and all(r["archived"] == ARCHIVE_MESSAGES for r in results)),
        Row(target="side-table writes by the archive",
            figure="ins {} upd {} del {}".format(*worst), limit="0",
            ok=all(r["flushed"] for r in results) and all(w == (0, 0, 0) for w in writes)
            and all(r["d_msg"][1] >= ARCHIVE_MESSAGES for r in results)),
        Row(target="side-table inserts for the new live set",
            figure=" / ".join(f"{r['d_side'][0]} (= {r['new_live']} new rows)" for r in results),
            limit="= new live rows",
            ok=all(r["d_side"][0] == r["new_live"] == r["live"] for r in results)),
    ]


# --- b) recall over 1M messages ---------------------------------------------------------------

COMMON = ("the to of and a in is it that for file error test run this with on you be not "
          "as are at or from have was we can if function value line output command path "
          "session message tool result user config server build").split()
_ONSETS = ("b c d f g h j k l m n p r s t v w z br cl dr fl gr pl pr sk sl st tr ch sh th"
           ).split()
_VOWELS = "a e i o u ai ea io ou".split()
_CODAS = ("", "", "n", "r", "s", "t", "l", "m", "nd", "st", "ck", "ng")


def make_words(rng: random.Random, n: int, *, syllables: tuple[int, int],
               taken: set[str]) -> list[str]:
    """``n`` distinct pronounceable pseudo-words not in ``taken`` (added to it)."""
    words: list[str] = []
    while len(words) < n:
        word = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS)
                       for _ in range(rng.randint(*syllables)))
        if word not in taken:
            taken.add(word)
            words.append(word)
    return words


def seed_messages(total: int, rng: random.Random) -> tuple[list[str], list[str], dict]:
    """Create USERS x SESSIONS_PER_USER sessions and ``total`` messages spread over them
    (interleaved, as concurrent sessions are; loaded with COPY; each message 6-42 words drawn
    from a Zipf distribution over the vocabulary): 70% of each session summarised away, the rest
    live with 1 in 20 rewound. The search side table is filled by ONE INSERT ... SELECT
    to_tsvector with the insert trigger disabled and the GIN index rebuilt afterwards (same
    expression as the trigger). Returns (vocabulary by rank, rare words, rare words each
    user can find)."""
    taken = set(COMMON)
    vocabulary = COMMON + make_words(rng, VOCABULARY - len(COMMON), syllables=(1, 3),
                                     taken=taken)
    rare = make_words(rng, RARE_WORDS, syllables=(4, 4), taken=taken)
    User = get_user_model()
    names = [f"bench-{i:03d}" for i in range(USERS)]
    User.objects.bulk_create([User(username=name, password="!") for name in names])
    user_ids = list(User.objects.filter(username__in=names).order_by("id")
                    .values_list("id", flat=True))
    Session.objects.bulk_create([
        Session(owner_id=u, provider="simulator", model="hermes-simulator",
                title=f"bench session {k} of user {u}")
        for u in user_ids for k in range(SESSIONS_PER_USER)])
    session_ids = list(Session.objects.filter(owner_id__in=user_ids).order_by("id")
                       .values_list("id", flat=True))
    n_sessions = len(session_ids)
    per_session = total // n_sessions
    archived_below = int(per_session * 0.7)
    first_id = _execute(f"SELECT coalesce(max(id), 0) FROM {MESSAGE_TABLE}")[0][0]
    started = time.perf_counter()
    _execute(f"ALTER TABLE {MESSAGE_TABLE} DISABLE TRIGGER agent_sessions_message_search_ins")
    _execute("DROP INDEX agent_sessions_message_search_tsv")
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]  # Zipf, s = 1
    cumulative = list(itertools.accumulate(weights))
    now = timezone.now().isoformat()
    roles = ("user", "assistant", "tool", "assistant")
    last = per_session * n_sessions
    with connection.cursor() as cursor, cursor.cursor.copy(
            f"COPY {MESSAGE_TABLE} ({_MESSAGE_COLUMNS}) FROM STDIN") as copy:
        for batch in range(0, last, COPY_BATCH):
            span = range(batch, min(batch + COPY_BATCH, last))
            lengths = [6 + g % 37 for g in span]
            words = rng.choices(vocabulary, cum_weights=cumulative, k=sum(lengths))
            lines: list[str] = []
            at = 0
            for g, n in zip(span, lengths):
                text = " ".join(words[at:at + n])
                at += n
                if g % RARE_EVERY == 0:
                    text += " " + rare[(g // RARE_EVERY) % len(rare)]
                position = g // n_sessions
                role = roles[position % 4]
                tool = role == "tool"
                archived = position < archived_below
                live = not archived and position % 20 != 19
                lines.append(
                    f"{session_ids[g % n_sessions]}\t{role}\t{text}\t\\N\t[]\t"
                    f"{'call_%d' % g if tool else ''}\t{'terminal' if tool else ''}\tf\t\t"
                    f"\\N\t\t{'t' if live else 'f'}\t{'t' if archived else 'f'}\t{now}\n")
            copy.write("".join(lines))
    generated = time.perf_counter()
    _execute(f"""
        INSERT INTO {SIDE_TABLE} (message_id, owner_id, tsv)
        SELECT m.id, s.owner_id,
               to_tsvector('simple', coalesce(m.content, '') || ' ' ||
                                     coalesce(m.tool_name, '') || ' ' ||
                                     coalesce(m.tool_calls::text, ''))
        FROM {MESSAGE_TABLE} m JOIN agent_sessions_session s ON s.id = m.session_id
        WHERE m.id > %s""", [first_id])
    filled = time.perf_counter()
    _execute("SET maintenance_work_mem = '256MB'")
    _execute(f"CREATE INDEX agent_sessions_message_search_tsv ON {SIDE_TABLE} USING gin (tsv)")
    _execute(f"ALTER TABLE {MESSAGE_TABLE} ENABLE TRIGGER agent_sessions_message_search_ins")
    _execute(f"ANALYZE {MESSAGE_TABLE}")
    _execute(f"ANALYZE {SIDE_TABLE}")
    _execute("ANALYZE agent_sessions_session")
    indexed = time.perf_counter()
    print(f"b) seeded {per_session * n_sessions:,} messages over {n_sessions:,} sessions of "
          f"{len(user_ids)} users: generate {generated - started:.1f} s, side table "
          f"{filled - generated:.1f} s (trigger off, one INSERT ... SELECT to_tsvector), "
          f"GIN index + ANALYZE {indexed - filled:.1f} s")
    findable: dict[int, list[str]] = {}
    for g in range(0, per_session * n_sessions, RARE_EVERY):
        position = g // n_sessions
        if position >= archived_below and position % 20 == 19:
            continue  # rewound: not findable
        owner = user_ids[(g % n_sessions) // SESSIONS_PER_USER]
        findable.setdefault(owner, []).append(rare[(g // RARE_EVERY) % len(rare)])
    return vocabulary, rare, findable


def search_queries(rng: random.Random, vocabulary: list[str], rare: list[str],
                   findable: dict[int, list[str]]) -> list[tuple[str, int, str]]:
    """(kind, user id, query) mixing common, mid-frequency and rare words."""
    users = sorted(findable)
    kinds = ("common", "two common", "mid", "common + mid", "rare (hit)", "rare (miss)",
             "common + rare")
    out = []
    for i in range(QUERIES + WARMUP_QUERIES):
        kind = kinds[i % len(kinds)]
        user = rng.choice(users)
        common = lambda: vocabulary[rng.randrange(10)]  # noqa: E731
        mid = lambda: vocabulary[rng.randrange(200, 1000)]  # noqa: E731
        mine = rng.choice(findable[user])
        query = {"common": common(), "two common": f"{common()} {vocabulary[rng.randrange(50)]}",
                 "mid": mid(), "common + mid": f"{common()} {mid()}",
                 "rare (hit)": mine, "rare (miss)": rng.choice(rare),
                 "common + rare": f"{common()} {mine}"}[kind]
        out.append((kind, user, query))
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def bench_search(total: int) -> list[Row]:
    rng = random.Random(4)
    vocabulary, rare, findable = seed_messages(total, rng)
    users = {u.pk: u for u in get_user_model().objects.filter(pk__in=list(findable))}
    queries = search_queries(rng, vocabulary, rare, findable)
    timings: dict[str, list[float]] = {}
    misses = 0
    for i, (kind, user_id, query) in enumerate(queries):
        started = time.perf_counter()
        hits = message_search(user=users[user_id], query=query)
        elapsed = (time.perf_counter() - started) * 1000
        if kind == "rare (hit)" and not hits:
            misses += 1
        if i >= WARMUP_QUERIES:
            timings.setdefault(kind, []).append(elapsed)
    every = [t for ts in timings.values() for t in ts]
    p50, p95 = percentile(every, 0.50), percentile(every, 0.95)
    print(f"   {len(every)} user-scoped queries after {WARMUP_QUERIES} warm-up "
          f"(message_search, limit 20): p50 {p50:.1f} ms, p95 {p95:.1f} ms, "
          f"max {max(every):.1f} ms")
    for kind, ts in timings.items():
        print(f"     {kind:<14} n={len(ts):<3} p50 {percentile(ts, 0.5):6.1f} ms  "
              f"p95 {percentile(ts, 0.95):6.1f} ms")
    count = _execute(f"SELECT count(*) FROM {MESSAGE_TABLE}")[0][0]
    return [Row(target=f"search p95 over {count:,} messages",
                figure=f"{p95:.1f} ms (p50 {p50:.1f})", limit=f"< {SEARCH_P95_LIMIT_MS:.0f} ms",
                ok=p95 < SEARCH_P95_LIMIT_MS and misses == 0 and count >= total)]


# --- c) estimator against the simulator's tokenizer -----------------------------------------

ENGLISH = (
    "The deployment finished a little after midnight, and nobody noticed the warning until "
    "the morning standup.",
    "She opened the log, scrolled past the usual noise, and found the line where the worker "
    "had quietly given up.",
    "Caching only pays off when the prefix stays byte-for-byte identical across requests.",
    "We agreed to keep the old behaviour behind a flag while the new path proves itself.",
    "The report lists every dependency, its licence, and the last time someone reviewed it.",
    "A long conversation eventually outgrows the window, so the harness summarises the middle "
    "and keeps the beginning and the end.",
    "Please double-check the migration before running it against the production database.",
    "The test failed twice on the build server but never on a laptop, which usually means a "
    "race or a clock.",
    "Our users mostly ask for small edits, yet the occasional request rewrites half a module.",
    "He suggested splitting the service in two; the team preferred to measure first.",
    "Memory usage climbed steadily during the import and dropped back once the batch "
    "committed.",
    "If the provider refuses the request, the error message says why, though not always "
    "politely.",
    "Documentation that nobody reads is still cheaper than an outage that everybody "
    "remembers.",
    "The quarterly numbers looked better than expected, mostly thanks to fewer retries.",
    "Write down what you changed, why you changed it, and how someone could undo it.",
)
CHINESE = (
    "人工智能是计算机科学的一个分支，它试图理解智能的本质，并生产出能以与人类智能相似的方式做出反应的机器。",
    "今天早上服务器突然变慢，运维同事检查了日志，发现是数据库连接池被耗尽了。",
    "我们决定先在测试环境里验证新的缓存策略，确认没有问题以后再逐步推广到生产环境。",
    "长对话最终会超出上下文窗口，所以系统会总结中间部分，同时保留开头和结尾。",
    "这份报告列出了每个依赖库的许可证、版本号以及最近一次安全审查的时间。",
    "请在执行数据库迁移之前做好备份，并确认回滚方案已经经过演练。",
    "用户大多只要求做一些小修改，但偶尔也会有人要求重写整个模块。",
    "北京的秋天天高气爽，公园里到处是散步的老人和放风筝的孩子。",
    "他建议把这个服务拆成两个，但团队更希望先收集数据再做决定。",
    "模型的回答虽然流畅，却引用了一篇并不存在的论文，这让审稿人很不满意。",
    "导入数据的时候内存占用持续上升，批量提交之后又迅速回落到正常水平。",
    "如果供应商拒绝了请求，错误信息通常会说明原因，只是措辞不一定友好。",
)
JAPANESE = (
    "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。",
    "今朝サーバーの応答が急に遅くなったので、担当者がログを確認したところ、接続プールが枯渇していました。",
    "新しいキャッシュ戦略はまずテスト環境で検証し、問題がないことを確かめてから本番に展開します。",
    "長い会話はいずれコンテキストウィンドウを超えるため、システムは途中の部分を要約し、最初と最後を残します。",
    "データベースの移行を実行する前に、必ずバックアップを取り、元に戻す手順を確認してください。",
    "ユーザーの多くは小さな修正を頼みますが、ときどきモジュール全体の書き直しを求める人もいます。",
    "京都の秋は紅葉がとても美しく、週末になると多くの観光客でにぎわいます。",
    "彼はサービスを二つに分けることを提案しましたが、チームはまず計測することを選びました。",
    "インポート中にメモリ使用量が少しずつ増え、バッチがコミットされると元の水準に戻りました。",
    "プロバイダーがリクエストを拒否した場合、エラーメッセージに理由が書かれていますが、丁寧とは限りません。",
    "このレポートには、すべての依存ライブラリのライセンスと最後にレビューされた日付が載っています。",
)
SYSTEM_PROMPT = (
    "You are Hermes, a careful coding agent working in the user's workspace. Read files "
    "before you change them, run the tests after every edit, and explain what you did in a "
    "few short sentences. Never invent file contents; when unsure, look.")
GROWTH_STEPS = 24
ANCHOR_EXCHANGES = 2


def code_chunks() -> list[str]:
    """Source of a few harness modules, cut into ~1,500-character pieces at line ends."""
    import agents.context.breaker
    import agents.context.compaction
    import agents.context.history
    import agents.context.prune

    chunks: list[str] = []
    for module in (agents.context.breaker, agents.context.compaction, agents.context.history, agents.context.prune):
        piece: list[str] = []
        for line in inspect.getsource(module).splitlines(keepends=True):
            piece.append(line)
            if sum(map(len, piece)) >= 1_500:
                chunks.append("".join(piece))
                piece = []
    return chunks


def prose(sentences: tuple[str, ...], joiner: str) -> Callable[[random.Random, int], str]:
    def text(rng: random.Random, chars: int) -> str:
        out: list[str] = []
        while sum(map(len, out)) < chars:
            out.append(rng.choice(sentences))
        return joiner.join(out)
    return text


def code(rng: random.Random, chars: int) -> str:
    chunks = code_chunks()
    out: list[str] = []
    while sum(map(len, out)) < chars:
        out.append(rng.choice(chunks))
    return "".join(out)


def conversation(text: Callable[[random.Random, int], str], exchanges: int) -> list[AgentMessage]:
    """``exchanges`` rounds of: user asks, assistant calls read_file, the tool result, the
    assistant answers; every text of the corpus's kind (the tool result is the big one)."""
    import json

    rng = random.Random(11)
    out: list[AgentMessage] = []
    for i in range(exchanges):
        call = ToolCall(id=f"toolu_{i:05d}", name="read_file",
                        arguments=json.dumps({"path": f"notes/part_{i}.txt"}))
        out += [AgentMessage(role="user", content=text(rng, 200)),
                AgentMessage(role="assistant", content=text(rng, 80), tool_calls=(call,)),
                tool_result(call, text(rng, 2_000)),
                AgentMessage(role="assistant", content=text(rng, 500))]
    return out


def billed_and_rough(transport: AnthropicTransport, tools, messages) -> tuple[int, int]:
    """(the simulator's billed prompt tokens, the harness's rough estimate) of one request
    built by the real transport."""
    payload = transport.build_payload(ModelRequest(
        model="hermes-simulator", system=SYSTEM_PROMPT, messages=tuple(messages), tools=tools))
    return sum(b.tokens for b in anthropic_blocks(payload)), estimate_payload_tokens(payload)


def bench_estimator() -> list[Row]:
    """Requests are sent where the harness sends them: after each user message and after each
    tool result. Calibrated error as the runner uses the Calibrator (re-anchored on every
    response whose prompt fit, projecting the next request) is the target; the drift of ONE
    anchor over 24 exchanges of growth is shown too: it tends to the raw error of the growth,
    since ``projected`` adds rough growth to the billed baseline (seed, "fire on the
    projection")."""
    transport = AnthropicTransport(PROFILES["simulator"], api_key="simulator")
    tools = default_registry().specs()
    corpora = {"English": prose(ENGLISH, " "), "Chinese": prose(CHINESE, ""),
               "Japanese": prose(JAPANESE, ""), "code": code}
    rows: list[Row] = []
    print("c) estimator vs the simulator's billed prompt tokens (Anthropic payloads from the "
          f"real transport, {ANCHOR_EXCHANGES + GROWTH_STEPS} exchanges of user / read_file "
          "call / ~2,000-char result / answer)")
    print(f"   {'corpus':<9} {'text raw':>9} {'payload raw':>12} {'re-anchored max':>16} "
          f"{'one anchor max':>15} {'billed last':>12}")
    for name, text in corpora.items():
        sample = text(random.Random(3), 20_000)
        text_raw = estimate_text_tokens(sample) / count_tokens(sample) - 1
        history = conversation(text, ANCHOR_EXCHANGES + GROWTH_STEPS)
        sends = [end for end in range(1, len(history) + 1)
                 if history[end - 1].role in ("user", "tool")]
        counted = {end: billed_and_rough(transport, tools, history[:end]) for end in sends}
        first = sends.index(4 * ANCHOR_EXCHANGES - 1)  # the tool result of exchange 2

        def calibrated(anchor_end: int) -> Calibrator:
            billed, rough = counted[anchor_end]
            calibrator = Calibrator(threshold=10 ** 9)
            calibrator.before_call(rough=rough, fingerprint="", message_count=anchor_end)
            calibrator.after_response(billed)
            return calibrator

        one = calibrated(sends[first])
        drift = [one.projected(counted[e][1]) / counted[e][0] - 1 for e in sends[first + 1:]]
        step = [calibrated(prev).projected(counted[e][1]) / counted[e][0] - 1
                for prev, e in zip(sends[first:], sends[first + 1:])]
        billed, rough = counted[sends[-1]]
        raw = rough / billed - 1
        worst, worst_drift = max(step, key=abs), max(drift, key=abs)
        print(f"   {name:<9} {text_raw:>+9.1%} {raw:>+12.1%} {worst:>+16.1%} "
              f"{worst_drift:>+15.1%} {billed:>12,}")
        rows.append(Row(target=f"estimator error, {name} (calibrated)",
                        figure=f"{worst:+.1%} max (raw {raw:+.1%})",
                        limit=f"+-{ESTIMATE_LIMIT:.0%}", ok=abs(worst) <= ESTIMATE_LIMIT))
    print("   text raw: estimate_text_tokens vs count_tokens on 20,000 chars of the corpus; "
          "payload raw: the last request, uncalibrated;")
    print("   re-anchored: anchor on each response, project the next request (the runner); "
          "one anchor: anchored once after exchange 2, projecting every later request.")
    return rows


# --- the run -----------------------------------------------------------------------------------

def print_table(rows: list[Row]) -> None:
    width = max(len(r.target) for r in rows)
    fig = max(len(r.figure) for r in rows)
    print()
    print(f"{'target':<{width}}  {'figure':<{fig}}  {'limit':<16}  result")
    print("-" * (width + fig + 30))
    for r in rows:
        print(f"{r.target:<{width}}  {r.figure:<{fig}}  {r.limit:<16}  "
              f"{'PASS' if r.ok else 'FAIL'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000,
                        help="messages generated for the search part (default 1,000,000)")
    args = parser.parse_args(argv)
    if connection.vendor != "postgresql":
        print("bench-context needs PostgreSQL (DATABASE_URL)", file=sys.stderr)
        return 2
    started = time.perf_counter()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True,
                                                  keepdb=False)
    print(f"database {connection.settings_dict['NAME']} (created and migrated; dropped at "
          "the end)")
    try:
        rows = bench_archive()
        rows += bench_search(args.messages)
        rows += bench_estimator()
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
    print_table(rows)
    print(f"\ntotal runtime {time.perf_counter() - started:.0f} s")
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
