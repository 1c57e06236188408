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
