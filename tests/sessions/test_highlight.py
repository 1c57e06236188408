"""Server-side highlighting of fenced code (sessions/highlight.py) as it reaches the page:
class-based spans that survive the sanitiser, escaped code, plain text for unknown
languages, and a stylesheet in static/ that matches what Pygments generates."""

from __future__ import annotations

from pathlib import Path

from sessions.highlight import HIGHLIGHT_MAX_CHARS, highlight_css
from sessions.rendering import markdown_html

ROOT = Path(__file__).resolve().parents[2]


def test_python_fence_is_highlighted_with_classes_only():
    html = markdown_html('```python\ndef f():\n    return "<script>"\n```')
    assert '<code class="language-python">' in html
    assert '<span class="k">def</span>' in html
    assert "&lt;script&gt;" in html and "<script" not in html
    assert "style=" not in html  # the CSP forbids inline styles


def test_unknown_missing_or_huge_blocks_stay_plain():
    assert "<span" not in markdown_html("```nosuchlanguage\nx = 1\n```")
    assert "<span" not in markdown_html("```\nx = 1\n```")
    assert "<span" not in markdown_html("```python\n" + "x = 1\n" * (HIGHLIGHT_MAX_CHARS // 6 + 1)
                                        + "```")


def test_raw_spans_in_the_source_are_still_escaped():
    html = markdown_html('<span class="k" onclick="x()">hi</span>')
    assert "<span" not in html and "&lt;span" in html


def test_the_static_stylesheet_is_current():
    css = (ROOT / "static" / "highlight.css").read_text()
    assert css == highlight_css()
    assert "@media (prefers-color-scheme: dark)" in css
