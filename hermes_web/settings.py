"""Django settings for Hermes Web: the ONLY module that reads os.environ.

Two run modes (DESIGN.md §1), chosen by the environment alone:

- embedded (no variables set): SQLite in WAL mode, the in-memory channel layer, Celery's
  in-memory broker with worker threads inside the web process, the provider simulator served
  by the same process.
- services (DATABASE_URL and/or REDIS_URL set): PostgreSQL, Redis as broker and channel layer,
  separate `celery worker` processes.

Harness tunables are collected into one ``HERMES`` mapping; sessions/tasks.py (the composition
root) turns it into agents/ objects, so agents/ never sees Django settings.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import dj_database_url
from csp import constants as csp_constants

BASE_DIR = Path(__file__).resolve().parent.parent


def env_str(name: str, default: str = "") -> str:
    """The variable's text, or ``default`` when unset."""
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    """1/true/yes/on (any case) is True; unset or empty is ``default``."""
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: list[str]) -> list[str]:
    """Comma-separated values, blanks dropped; ``default`` when unset."""
    value = os.environ.get(name)
    return [v.strip() for v in value.split(",") if v.strip()] if value else default


def _default_data_dir() -> Path:
    """$XDG_DATA_HOME/hermes-web, else ~/.local/share/hermes-web: outside the checkout and
    every git tree, so an agent's `git reset --hard` in a workspace can never reach the app's
    repository and Landlock can keep the app's code unreadable (issue 8 finding 5)."""
    xdg = env_str("XDG_DATA_HOME")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".local" / "share"
    return base / "hermes-web"


DATA_DIR = Path(env_str("HERMES_DATA_DIR") or str(_default_data_dir())).resolve()
DATA_DIR.mkdir(parents=True, exist_ok=True, mode=0o700)


def _secret_key() -> str:
    """DJANGO_SECRET_KEY, else a random key generated once and kept in DATA_DIR (so a fresh
    machine needs no configuration and sessions survive restarts)."""
    key = env_str("DJANGO_SECRET_KEY")
    if key:
        return key
    path = DATA_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

DATABASE_URL = env_str("DATABASE_URL")
REDIS_URL = env_str("REDIS_URL")
EMBEDDED = not DATABASE_URL and not REDIS_URL
"""True in the zero-configuration mode of `make run`."""

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",  # naturaltime: "30 seconds ago", never "0 minutes ago"
    "channels",
    "django_htmx",
    "template_partials",
    "axes",
    "accounts",
    "sessions.apps.SessionsConfig",
    "approvals",
    "django_celery_beat",
    "schedules",
    "webhooks",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "hermes_web.middleware.HtmxLoginRedirectMiddleware",
    "hermes_web.middleware.MethodNotAllowedPageMiddleware",
    "axes.middleware.AxesMiddleware",
]

AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]

ROOT_URLCONF = "hermes_web.urls"
ASGI_APPLICATION = "hermes_web.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "approvals.context_processors.pending_approvals",
                "sessions.context_processors.sidebar",
            ],
        },
    },
]

# --- Database ---------------------------------------------------------------------------
if DATABASE_URL:
    # Persistent connections, health-checked before reuse: daphne runs every socket's
    # database work on ONE thread, and with a new connection per call (conn_max_age=0)
    # half of that thread's time went to connecting; 100 sockets reconnecting at once then
    # overran daphne's handshake timeout (docs/reliability.md). A connection the server
    # dropped (restart, pg_terminate_backend) fails the health check and is replaced.
    DATABASES = {"default": dj_database_url.parse(
        DATABASE_URL, conn_max_age=int(env_str("HERMES_DB_CONN_MAX_AGE", "60")),
        conn_health_checks=True)}
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": env_str("HERMES_SQLITE_PATH", str(DATA_DIR / "hermes.sqlite3")),
            "OPTIONS": {
                # WAL: many readers beside one writer (seed, "Where the conversation lives").
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                # IMMEDIATE: a write transaction takes the lock at BEGIN, so two writers wait
                # instead of failing with "database is locked" on upgrade.
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
            },
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Channels ---------------------------------------------------------------------------
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            # Pub/sub: one PUBLISH per event and no polling round trips on receive (the
            # core layer's four round trips per send and per receive were the stream
            # backlog: benchmarks/bench_stream.py). Delivery is fire-and-forget, which the
            # event log covers: every event is stored first and a socket that sees a seq
            # gap, or reconnects, replays it from the database.
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            # redis-py 8 defaults socket_timeout to 5 s, which kills an idle consumer's
            # blocking read (channels_redis #422): wait for messages without a timeout.
            "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": None}]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer",
                                  "CONFIG": {"capacity": 2000}}}

# --- Celery -----------------------------------------------------------------------------
CELERY_BROKER_URL = REDIS_URL or "memory://localhost/"
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
# A worker killed mid-turn (SIGKILL, OOM) gives its message back instead of acking it
# (hermes_web/celery.py sizes the Redis visibility timeout; issue 10 item 9, case B39).
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ALWAYS_EAGER = env_bool("HERMES_CELERY_EAGER", False)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE = {
    "approvals-expire": {"task": "approvals.expire_task", "schedule": 15.0},
    "turns-recover": {"task": "sessions.turn_recover_task", "schedule": 60.0},
}
# Schedules live in the database (schedules/ writes django-celery-beat rows); the same
# scheduler runs in `celery beat` (services) and in a beat thread of the web process
# (embedded, hermes_web/embedded.py).
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
DJANGO_CELERY_BEAT_TZ_AWARE = True
EMBEDDED_WORKER_THREADS = int(env_str("HERMES_WORKER_THREADS", "4"))
EMBEDDED_BEAT = env_bool("HERMES_EMBEDDED_BEAT", True)

# --- Cache (webhook rate limits: shared by every process in services mode) --------------
if REDIS_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                          "LOCATION": REDIS_URL, "KEY_PREFIX": "hermes"}}
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# --- Inbound webhooks (webhooks/) ---------------------------------------------------------
WEBHOOKS = {
    "MAX_BODY_BYTES": int(env_str("HERMES_WEBHOOK_MAX_BYTES", "65536")),
    "REPLAY_WINDOW_SECONDS": 300,
    # accepted deliveries per webhook per window; and rejected ones logged per window
    "RATE_LIMIT": int(env_str("HERMES_WEBHOOK_RATE_LIMIT", "30")),
    "RATE_WINDOW_SECONDS": 60,
    "REJECT_LOG_LIMIT": 30,
}

# --- Auth -------------------------------------------------------------------------------
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "session_list"
LOGOUT_REDIRECT_URL = "login"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
AXES_FAILURE_LIMIT = int(env_str("HERMES_LOGIN_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = 0.25  # hours
# Lock the (username, address) pair, not either alone: a stranger guessing one account
# cannot lock everyone out of a shared address, nor one account out of every address.
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/lockout.html"
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False
SESSION_COOKIE_SAMESITE = "Lax"

# --- Content-Security-Policy (django-csp 4.x: one dict, directives keyed by name) ----------
# Issue 8, finding 10. Everything from this origin only: no inline script or handler (pages
# use static/*.js), no eval, no inline style, no image from another host (a reply cannot leak
# data in an image URL even if one slipped past sessions/rendering.py), no plugins, no
# framing. connect-src 'self' covers this origin's ws:// and wss:// (CSP Level 3).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [csp_constants.SELF],
        "script-src": [csp_constants.SELF],
        "style-src": [csp_constants.SELF],
        "img-src": [csp_constants.SELF],
        "connect-src": [csp_constants.SELF],
        "font-src": [csp_constants.SELF],
        "object-src": [csp_constants.NONE],
        "base-uri": [csp_constants.NONE],
        "form-action": [csp_constants.SELF],
        "frame-ancestors": [csp_constants.NONE],
    },
}

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)  # whitenoise serves from the finders; the dir must exist
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("HERMES_LOG_LEVEL", "WARNING")},
    "loggers": {"hermes": {"level": env_str("HERMES_LOG_LEVEL", "INFO")}},
}

# --- The harness ------------------------------------------------------------------------
_SIM_PORT = int(env_str("HERMES_SIMULATOR_PORT", "8765"))
def env_pairs(name: str) -> list[tuple[str, str]]:
    """``a=x,b=y`` as [("a", "x"), ("b", "y")]; an item without "=" has an empty value
    (HERMES_FALLBACK_PROVIDERS uses ":" instead, see below)."""
    pairs = []
    for item in env_str(name).split(","):
        if item.strip():
            key, _, value = item.strip().partition("=")
            pairs.append((key.strip(), value.strip()))
    return pairs


def env_key_pools() -> dict[str, list[tuple[str, str]]]:
    """Credential pools: HERMES_API_KEYS_<PROVIDER>=label=key,label=key (provider name
    upper-cased, "-" as "_"), e.g. HERMES_API_KEYS_ANTHROPIC=main=sk-1,backup=sk-2."""
    prefix = "HERMES_API_KEYS_"
    return {name[len(prefix):].lower().replace("_", "-"): env_pairs(name)
            for name in os.environ if name.startswith(prefix) and env_str(name).strip()}


_DEFAULT_PROVIDER = (
    "anthropic" if env_str("ANTHROPIC_API_KEY") else "openai" if env_str("OPENAI_API_KEY")
    else "simulator"
)

HERMES = {
    # Provider selection (agents/providers.py profiles; any compatible endpoint works).
    "PROVIDER": env_str("HERMES_PROVIDER", _DEFAULT_PROVIDER),
    # The workspace panel's upload cap (bytes; sessions/files.py).
    "UPLOAD_MAX_BYTES": int(env_str("HERMES_UPLOAD_MAX_BYTES", "10000000")),
    "MODEL": env_str("HERMES_MODEL"),
    "CONTEXT_WINDOW": int(env_str("HERMES_CONTEXT_WINDOW", "0")) or None,
    "API_KEYS": {
        "ANTHROPIC_API_KEY": env_str("ANTHROPIC_API_KEY"),
        "OPENAI_API_KEY": env_str("OPENAI_API_KEY"),
    },
    "BASE_URLS": {
        "anthropic": env_str("ANTHROPIC_BASE_URL"),
        "openai": env_str("OPENAI_BASE_URL"),
    },
    # Provider failures (issue 10): fallbacks tried in order after the session's provider
    # ("provider" or "provider:model"), key pools per provider (labels are shown, keys never),
    # breakpoint limits per endpoint for proxies that add their own cache markers, and the
    # longest retry-after (seconds) slept on before failing over instead.
    "FALLBACK_PROVIDERS": [tuple(item.strip().partition(":")[::2])
                           for item in env_str("HERMES_FALLBACK_PROVIDERS").split(",")
                           if item.strip()],
    "KEY_POOLS": env_key_pools(),
    "BREAKPOINT_LIMITS": {url.rstrip("/"): int(limit)
                          for url, limit in env_pairs("HERMES_BREAKPOINT_LIMITS")},
    "MAX_RETRY_AFTER": float(env_str("HERMES_MAX_RETRY_AFTER", "30")),
    # The provider simulator (simulator/): served in-process in embedded mode.
    "SIMULATOR_URL": env_str("HERMES_SIMULATOR_URL", f"http://127.0.0.1:{_SIM_PORT}"),
    "SIMULATOR_PORT": _SIM_PORT,
    "SIMULATOR_EMBEDDED": env_bool("HERMES_SIMULATOR_EMBEDDED", EMBEDDED),
    # The secret of its /_sim/* control API (request log, scripts, faults); unset: a random
    # one per start, written to DATA_DIR/simulator_token (0600). simulator/control.py.
    "SIMULATOR_TOKEN": env_str("HERMES_SIMULATOR_TOKEN"),
    # `manage.py hermes chat` in embedded mode runs its own worker threads (tests that
    # provide a worker turn this off).
    "CLI_EMBEDDED_WORKER": True,
    # What starts that worker (and the simulator): a dotted path, so the command in
    # sessions/ does not import the project package (issue 11 item 2).
    "EMBEDDED_START": "hermes_web.embedded.start_if_configured",
    # Loop.
    "MAX_ITERATIONS": int(env_str("HERMES_MAX_ITERATIONS", "90")),
    # Delegation (agents/tools/delegate.py): iteration budget of each child agent, and the
    # spawn depth (1: children never delegate; 2: an orchestrator child regains delegate).
    "CHILD_MAX_ITERATIONS": int(env_str("HERMES_CHILD_MAX_ITERATIONS", "50")),
    "DELEGATION_MAX_DEPTH": int(env_str("HERMES_DELEGATION_MAX_DEPTH", "1")),
    "MAX_OUTPUT_TOKENS": int(env_str("HERMES_MAX_OUTPUT_TOKENS", "4096")),
    "MAX_MESSAGE_CHARS": 100_000,
    # Streaming (sessions/sink.py): text deltas gathered into one text.delta event per window
    # (ms; 0 = an event per delta), and the first delta of each reply sent at once.
    "DELTA_BATCH_MS": float(env_str("HERMES_DELTA_BATCH_MS", "50")),
    "FIRST_DELTA_FLUSH": env_bool("HERMES_FIRST_DELTA_FLUSH", True),
    # The GIL switch interval of every process (ms; sessions/events.py switch_interval_apply:
    # socket-waiting threads get the GIL back sooner from busy turn threads; 0 = Python's 5).
    "SWITCH_INTERVAL_MS": float(env_str("HERMES_SWITCH_INTERVAL_MS", "1")),
    # Seconds before the first retry of a retryable provider error (doubling, capped).
    "RETRY_BASE_DELAY": float(env_str("HERMES_RETRY_BASE_DELAY", "1.0")),
    # Seconds a turn waits in all for a provider that keeps answering "rate limited" or
    # "overloaded" once no fallback is left (agents/transports/patience.py); 0 = fail at once.
    "THROTTLE_PATIENCE": float(env_str("HERMES_THROTTLE_PATIENCE", "300")),
    # Prompt cache (agents/cache.py): "auto" (the default: TTLs and the cold-resume prune
    # chosen per session from its idle gaps, agents/cache_strategy.py), or "5m" / "1h" fixed.
    "CACHE_TTL": env_str("HERMES_CACHE_TTL", "auto"),
    # TTL of the two system-prompt breakpoints; empty = CACHE_TTL (issue 3: 5m by default,
    # 1h by configuration). "1h" keeps the prompt warm across a lunch break while messages
    # stay at CACHE_TTL (clamped to 5m on routes that do not honour 1h).
    "CACHE_PROMPT_TTL": env_str("HERMES_CACHE_PROMPT_TTL", ""),
    # Where session workspaces live, and the home holding SOUL.md and skills/.
    "WORKSPACE_ROOT": Path(env_str("HERMES_WORKSPACE_ROOT", str(DATA_DIR / "workspaces"))),
    "HOME": Path(env_str("HERMES_HOME", str(DATA_DIR / "home"))),
    # Approvals: HERMES_YOLO is read here, once, at process start (seed, "The one-line
    # attack"); agents/policy/__init__.py freezes it and nothing later can turn it on.
    "YOLO": env_bool("HERMES_YOLO", False),
    "APPROVAL_TIMEOUT_SECONDS": int(env_str("HERMES_APPROVAL_TIMEOUT", "300")),
    # Durable memory: characters of one user's notes together (agents/memory.py).
    "MEMORY_CHAR_LIMIT": int(env_str("HERMES_MEMORY_CHAR_LIMIT", "2200")),
    # execute_code: characters of script output kept (agents/tools/execute_code.py).
    "CODE_OUTPUT_CAP": int(env_str("HERMES_CODE_OUTPUT_CAP", "50000")),
    "BACKEND": env_str("HERMES_BACKEND", "auto"),  # auto | local | sandbox
    # The unprivileged host uid/gid sandboxed commands run as when the worker is root.
    "SANDBOX_UID": int(env_str("HERMES_SANDBOX_UID", "61000")),
    # Local backend: Landlock where the kernel has it (auto), demanded (landlock), or off.
    "LOCAL_CONFINEMENT": env_str("HERMES_LOCAL_CONFINEMENT", "auto"),
    # Sessions a worker process keeps between their turns (agents/session_cache.py: the
    # pipeline and the live transcript, so the next turn loads only appended rows), bounded
    # in entries and in estimated bytes; least recently kept evicted first.
    "BOUND_SESSIONS_MAX": int(env_str("HERMES_BOUND_SESSIONS_MAX", "128")),
    "BOUND_SESSIONS_BYTES": int(env_str("HERMES_BOUND_SESSIONS_BYTES", str(384 * 1024 * 1024))),
    # Turn lease (seconds); renewed every iteration and by a heartbeat while a turn runs.
    "LEASE_SECONDS": int(env_str("HERMES_LEASE_SECONDS", "120")),
    # PostgreSQL: a read-only tool call's start (tool.called) and its ledgered output are
    # committed without waiting for the WAL flush (sessions/writes.py): a database crash can
    # then at worst make a read run again (and a card the user saw vanish); a call with
    # effects always waits. Off by default: every write waits for the disk (durable means
    # durable); on, a read-only call saves about two disk waits (make bench).
    "RELAXED_READ_ONLY_COMMITS": env_bool("HERMES_RELAXED_READ_ONLY_COMMITS", False),
    # Redis visibility timeout (s) for unacknowledged turn tasks; 0 = max(3600, longest
    # tool call + one lease) (hermes_web/celery.py). Fault tests lower it.
    "VISIBILITY_TIMEOUT": int(env_str("HERMES_VISIBILITY_TIMEOUT", "0")),
    # Context management (agents/context/compaction.py, agents/context/prune.py).
    "COMPACTION_ENABLED": env_bool("HERMES_COMPACTION", True),
    "PRUNE_TRIGGER_TOKENS": int(env_str("HERMES_PRUNE_TRIGGER", "0")),
    "MICRO_COMPACTION": env_bool("HERMES_MICRO_COMPACTION", False),
    "PRUNE_ON_COLD_RESUME": env_bool("HERMES_PRUNE_ON_COLD_RESUME", True),
    "IDLE_COMPACTION_SECONDS": int(env_str("HERMES_IDLE_COMPACTION", "0")),
    # Money (accounts/pricing.py, accounts/budgets.py): operator rate overrides (a list of
    # {"provider", "model" ("*" = all), "input", "output", "cache_read", "cache_write_5m",
    # "cache_write_1h"} in USD per million tokens; the admin's RateOverride rows win), and
    # how long a call waits for in-flight calls to settle before a cap refuses it.
    "PRICING_OVERRIDES": [],
    "BUDGET_WAIT_SECONDS": float(env_str("HERMES_BUDGET_WAIT_SECONDS", "30")),
    # MCP servers (sessions/mcp.py): how long a turn start waits for a server this worker
    # process has just started (seconds; a slower one reaches sessions through the rebuild
    # at a later turn), the longest tool call, the keep-alive ping interval, and the admin
    # form's connection check.
    "MCP_CONNECT_WAIT": float(env_str("HERMES_MCP_CONNECT_WAIT", "5")),
    "MCP_CALL_TIMEOUT": float(env_str("HERMES_MCP_CALL_TIMEOUT", "120")),
    "MCP_PING_INTERVAL": float(env_str("HERMES_MCP_PING_INTERVAL", "5")),
    "MCP_CHECK_TIMEOUT": float(env_str("HERMES_MCP_CHECK_TIMEOUT", "15")),
    # Who may configure a stdio MCP server (a command the worker starts on the host as its
    # own user): "staff" (team admins who are staff), "admins" (any team admin) or "off".
    "MCP_STDIO_ALLOWED": env_str("HERMES_MCP_STDIO_ALLOWED", "staff"),
    # Hosts (or host:port) a streamable-HTTP MCP server may resolve to a loopback, private
    # or link-local address; every other such URL is refused (agents/egress.py: a team
    # admin must not reach the host's PostgreSQL, Redis or metadata endpoint through it).
    "MCP_HTTP_ALLOW_PRIVATE": env_list("HERMES_MCP_HTTP_ALLOW_PRIVATE", []),
}
