"""Event partials: the same HTML for the page and the socket."""

from __future__ import annotations

import pytest

from sessions.rendering import event_frame

pytestmark = pytest.mark.django_db


def test_compaction_event_renders_a_divider_that_expands_to_the_summary():
    frame = event_frame({"seq": 7, "type": "compaction", "session_id": 1, "ts": 0.0,
                         "payload": {"tokens_before": 15000, "tokens_after": 4000,
                                     "summary": "The user **read** big.txt <script>x</script>"}})
    html = frame["html"]
    assert 'class="compaction-divider"' in html and "<details>" in html
    assert "15000 → 4000 tokens" in html
    assert "<strong>read</strong>" in html and "<script>" not in html


def test_text_delta_frames_carry_no_html():
    frame = event_frame({"seq": 8, "type": "text.delta", "session_id": 1, "ts": 0.0,
                         "payload": {"text": "hello"}})
    assert "html" not in frame


def test_plain_events_really_have_no_partial():
    """The consumer skips rendering for PLAIN_EVENTS; that must lose nothing."""
    from sessions.rendering import PLAIN_EVENTS

    for kind in PLAIN_EVENTS:
        frame = event_frame({"seq": 9, "type": kind, "session_id": 1, "ts": 0.0,
                             "payload": {"text": "x", "title": "t", "turn_id": 1}})
        assert "html" not in frame, kind


def test_a_terminal_result_with_a_nonzero_exit_code_shows_as_failed_even_when_long():
    """The exit code comes from the stored tool metadata (issue 11 item 4), not the text."""
    from sessions.rendering import tool_card

    call = {"id": "t1", "name": "terminal", "arguments": {"command": "make"}}
    long_output = "x" * 50_000 + "\n[exit code 2]"
    card = tool_card(call, {"content": long_output, "is_error": False,
                            "tool_meta": {"exit_code": 2}})
    assert card["status"] == "failed" and card["status_label"] == "exit 2"
    ok = tool_card(call, {"content": "fine\n[exit code 0]", "is_error": False,
                          "tool_meta": {"exit_code": 0}})
    assert ok["status"] == "done" and ok["status_label"] == "done"
    # Text that merely looks like an exit line (a file that was cat'ed) decides nothing.
    typed = tool_card(call, {"content": "notes.txt says:\n[exit code 7]", "is_error": False,
                             "tool_meta": {"exit_code": 0}})
    assert typed["status"] == "done"


def test_favicon_is_served(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"].endswith("favicon.svg")


def test_task_lists_render_disabled_labelled_checkboxes_and_raw_inputs_stay_text():
    from sessions.rendering import markdown_html

    html = str(markdown_html("- [x] done\n- [ ] todo\n- plain\n\n<input type=checkbox> raw"))
    assert '<li class="task-list-item"><input type="checkbox" disabled="" checked="" ' \
           'aria-label="done"> done</li>' in html
    assert 'aria-label="not done"> todo</li>' in html and "<li>plain</li>" in html
    assert "&lt;input type=checkbox&gt; raw" in html and html.count("<input") == 2
