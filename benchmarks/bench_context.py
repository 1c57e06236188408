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
c) estimator error (``agents.tokens``) against the simulator's billed counts
   (``agents.simulator``) within +-20% after calibration, on English, Chinese, Japanese and
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

