"""What the issue-2 benchmarks share: a throwaway database, a booted Django, figures.

Why here: bench_overhead.py and bench_stream.py both need a database nobody else uses
(PostgreSQL when DATABASE_URL is set, SQLite in a temporary directory otherwise), settings
pointed at a provider simulator of their own, and the same percentile and table printing.
Nothing here measures anything; the measurements and their targets live in the scripts.

Environment, read here because these scripts run outside Django's settings:
DATABASE_URL (PostgreSQL server to create ``hermes_bench_<name>`` on; HERMES_BENCH_DB_SUFFIX,
when set, is appended to that name so two people benchmarking on one server never drop each
other's database), REDIS_URL (services
mode; the stream benchmark uses database ``HERMES_BENCH_REDIS_DB``, default 13, of that
server so it never consumes another Celery worker's queue).
"""

from __future__ import annotations

import math
import os
import shutil
import socket
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@dataclass(kw_only=True)
class BenchEnv:
    """The environment one benchmark runs in. ``env`` is what was put in os.environ (and
    what a subprocess must inherit); ``database`` a human label; ``pg_url`` the PostgreSQL
    URL of the throwaway database (None on SQLite); ``tmp`` the temporary directory."""

    name: str
    tmp: Path
    env: dict[str, str] = field(default_factory=dict)
    database: str = ""
    pg_url: str | None = None
    redis_url: str | None = None

    def cleanup(self) -> None:
        """Drop the PostgreSQL database (best effort) and remove the temporary directory."""
        if self.pg_url:
            try:
                from django.db import connections

                connections.close_all()
            except Exception:  # Django may not be set up yet
                pass
            try:
                _pg_recreate(self.pg_url, create=False)
            except Exception as exc:  # leave it: the next run drops it first anyway
                print(f"  (could not drop {self.database}: {exc})")
        shutil.rmtree(self.tmp, ignore_errors=True)


def _pg_recreate(url: str, *, create: bool = True) -> None:
    """DROP (and CREATE) the database named in ``url`` through the server's ``postgres``
    maintenance database."""
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if create:
            conn.execute(f'CREATE DATABASE "{name}"')


def prepare_environment(name: str, *, simulator_url: str, extra: dict[str, str] | None = None,
                        use_redis: bool = False) -> BenchEnv:
    """Point Django at a fresh database and the benchmark's simulator, before django.setup().

    PostgreSQL (DATABASE_URL set): database ``hermes_bench_<name>`` (plus
    ``_<HERMES_BENCH_DB_SUFFIX>`` when that is set) dropped and created on that server. Otherwise SQLite (WAL, as in embedded mode) in a temporary directory. The
    provider is forced to the simulator so no real API is ever called. ``use_redis``: keep
    REDIS_URL (on database HERMES_BENCH_REDIS_DB) for Celery and the channel layer; else it
    is removed and the in-memory broker and layer are used.
    """
    tmp = Path(tempfile.mkdtemp(prefix=f"hermes-bench-{name}-"))
    bench = BenchEnv(name=name, tmp=tmp)
    env = {
        "DJANGO_SETTINGS_MODULE": "hermes_web.settings",
        "HERMES_DATA_DIR": str(tmp),
        "HERMES_PROVIDER": "simulator",
        "HERMES_MODEL": "",
        "HERMES_SIMULATOR_URL": simulator_url,
        "HERMES_SIMULATOR_EMBEDDED": "0",
        "HERMES_BACKEND": "local",
        "HERMES_LOG_LEVEL": "WARNING",
        "DJANGO_SECRET_KEY": "bench-" + name,
        "ANTHROPIC_API_KEY": "",
        "OPENAI_API_KEY": "",
    }
    database_url = os.environ.get("DATABASE_URL", "")
    if database_url:
        parts = urlsplit(database_url)
        suffix = os.environ.get("HERMES_BENCH_DB_SUFFIX", "")
        if suffix and not suffix.replace("_", "").isalnum():
            raise ValueError(f"HERMES_BENCH_DB_SUFFIX must be letters, digits, _: {suffix!r}")
        db_name = f"hermes_bench_{name}" + (f"_{suffix}" if suffix else "")
        bench.pg_url = urlunsplit(parts._replace(path=f"/{db_name}"))
        _pg_recreate(bench.pg_url)
        env["DATABASE_URL"] = bench.pg_url
        bench.database = f"PostgreSQL {parts.hostname}:{parts.port or 5432}/{db_name}"
    else:
        env["HERMES_SQLITE_PATH"] = str(tmp / "bench.sqlite3")
        bench.database = f"SQLite (WAL) {tmp / 'bench.sqlite3'}"
    redis_url = os.environ.get("REDIS_URL", "")
    if use_redis and redis_url:
        parts = urlsplit(redis_url)
        db = os.environ.get("HERMES_BENCH_REDIS_DB", "13")
        bench.redis_url = urlunsplit(parts._replace(path=f"/{db}"))
        env["REDIS_URL"] = bench.redis_url
    else:
        os.environ.pop("REDIS_URL", None)
    env.update(extra or {})
    os.environ.update(env)
    bench.env = env
    return bench


def django_boot() -> None:
    """django.setup() and migrate the benchmark's database (quietly)."""
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def percentile(values: list[float], p: float) -> float:
    """The ``p``-th percentile (0-100) by the nearest-rank method; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def print_table(title: str, header: tuple[str, ...], rows: list[tuple]) -> None:
    """A plain fixed-width table: numbers right-aligned, text left-aligned."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h)
              for i, h in enumerate(header)]
    print(f"\n{title}")
    print("  " + "  ".join(h.ljust(w) if i == 0 else h.rjust(w)
                           for i, (h, w) in enumerate(zip(header, widths))))
    print("  " + "  ".join("-" * w for w in widths))
    for row in cells:
        print("  " + "  ".join(v.ljust(w) if i == 0 else v.rjust(w)
                               for i, (v, w) in enumerate(zip(row, widths))))


def _cell(value) -> str:
    if isinstance(value, float):
        return "n/a" if math.isnan(value) else f"{value:.2f}"
    return str(value)
