"""Tool card summaries and statuses (sessions/tool_cards.py; issue 14 broken items 4 and 6):
built from the call's arguments and the result's metadata, per tool, never raising."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessions.tool_cards import SUMMARY_CHARS, tool_status, tool_summary


@pytest.mark.parametrize(("name", "args", "meta", "expected"), [
    ("patch", {"path": "hello.txt", "old_string": "old", "new_string": "new",
               "replace_all": False}, {"replacements": 1, "files": 1},
     "patch hello.txt: 1 replacement"),
    ("patch", {"path": "a.py", "old_string": "x", "new_string": "y", "replace_all": True},
     {"replacements": 3}, "patch a.py: 3 replacements"),
    ("patch", {"edits": [{"path": "a.py", "old_string": "1", "new_string": "2"},
                         {"path": "b.py", "old_string": "1", "new_string": "2"},
                         {"path": "a.py", "old_string": "3", "new_string": "4"}]},
     {"replacements": 3, "files": 2}, "patch a.py, b.py: 3 replacements"),
    ("patch", {"path": "hello.txt", "old_string": "o", "new_string": "n"}, None,
     "patch hello.txt"),
    ("read_file", {"path": "README.md"}, None, "read README.md"),
    ("read_file", {"path": "README.md"}, {"total_lines": 42}, "read README.md (42 lines)"),
    ("read_file", {"path": "big.log", "offset": 10, "limit": 21}, {"total_lines": 1},
     "read big.log lines 10–30 (1 line)"),
    ("write_file", {"path": "notes.txt", "content": "a\nb\n"}, {"created": True, "lines": 2},
     "create notes.txt: 2 lines"),
    ("write_file", {"path": "notes.txt", "content": "a"}, {"created": False, "lines": 1},
     "overwrite notes.txt: 1 line"),
    ("write_file", {"path": "notes.txt", "content": "a"}, None, "write notes.txt"),
    ("terminal", {"command": "ls   -la\n", "timeout": 30}, {"exit_code": 0},
     "terminal: ls -la"),
    ("search_files", {"pattern": "foo", "path": "src/"}, {"hits": 3, "truncated": False},
     'search "foo" in src/: 3 matches'),
    ("search_files", {"pattern": "foo"}, {"hits": 200, "truncated": True},
     'search "foo" in .: 200 matches+'),
    ("search_files", {"pattern": "foo", "glob": "*.py"}, None, 'search "foo" in . (*.py)'),
    ("skills_list", {}, None, "list skills"),
    ("skill_view", {"name": "deploy"}, None, "view skill deploy"),
    ("session_search", {"query": "invoices"}, None, 'search past sessions for "invoices"'),
    ("mcp_weather", {"city": "Oslo", "days": 3}, None, "mcp_weather: Oslo, 3"),
    ("terminal", "not json", None, "terminal: not json"),
    ("read_file", {"path": ["odd"]}, None, 'read ["odd"]'),
    ("patch", {"edits": "nonsense"}, None, "patch ?"),
])
def test_summaries(name, args, meta, expected):
    assert tool_summary(name, json.dumps(args) if isinstance(args, dict) else args,
                        meta) == expected


def test_summaries_are_cut():
    summary = tool_summary("terminal", {"command": "echo " + "x" * 500})
    assert len(summary) == SUMMARY_CHARS and summary.endswith("…")


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=30),
                           lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                           max_leaves=10)


@given(name=st.sampled_from(["terminal", "read_file", "write_file", "patch", "search_files",
                             "skills_list", "skill_view", "session_search", "other", ""]),
       args=json_values | st.dictionaries(
           st.sampled_from(["path", "command", "pattern", "offset", "limit", "edits", "glob",
                            "name", "query", "content"]), json_values, max_size=5),
       meta=json_values)
def test_summaries_never_raise_and_stay_one_short_line(name, args, meta):
    summary = tool_summary(name, args, meta if isinstance(meta, dict) else None)
    assert isinstance(summary, str) and "\n" not in summary
    assert len(summary) <= SUMMARY_CHARS


@pytest.mark.parametrize(("result", "approval", "expected"), [
    (None, None, ("running", "running")),
    ({"is_error": False, "tool_meta": {}}, None, ("done", "done")),
    ({"is_error": True, "tool_meta": {}}, None, ("error", "error")),
    ({"is_error": True, "tool_meta": {"timed_out": True, "exit_code": -9}}, None,
     ("error", "timed out")),
    ({"is_error": False, "tool_meta": {"exit_code": 2}}, None, ("failed", "exit 2")),
    ({"is_error": True, "tool_meta": {"stopped": True, "exit_code": -15}}, None,
     ("stopped", "stopped")),
    (None, "cancelled", ("cancelled", "cancelled")),
    ({"is_error": True, "tool_meta": {}}, "cancelled", ("cancelled", "cancelled")),
    ({"is_error": True, "tool_meta": {}}, "denied", ("denied", "denied")),
    (None, "expired", ("expired", "expired")),
    ({"is_error": False, "tool_meta": {}}, "approved", ("done", "done")),
    (None, "pending", ("waiting", "awaiting approval")),  # nothing runs before the decision
    (None, "approved", ("running", "running")),
    (None, "awaiting_answer", ("waiting", "waiting for your answer")),  # a clarify question
    ({"is_error": False, "tool_meta": {}}, "awaiting_answer", ("done", "done")),  # answered
])
def test_statuses(result, approval, expected):
    assert tool_status(result=result, approval_state=approval) == expected


@pytest.mark.parametrize("approval", [None, "approved"])
def test_a_call_not_announced_as_started_is_queued_not_running(approval):
    assert tool_status(result=None, approval_state=approval, started=False) == (
        "queued", "queued")
    done = {"is_error": False, "tool_meta": {}}
    assert tool_status(result=done, approval_state=approval, started=False) == ("done", "done")
