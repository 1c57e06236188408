"""Search excerpts mark each match once on both backends (SQLite FTS5 snippet() and
PostgreSQL ts_headline), even when the message text itself holds « » (a session_search
result quoting an earlier excerpt did, and the page showed <mark><mark>README</mark></mark>)."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from sessions.models import Message
from sessions.search import message_search, session_search_for_tool
from sessions.services import session_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(make_user, hermes_settings):
    return make_user("alice")


@pytest.fixture
def chat(alice):
    return session_create(user=alice, title="Notes")


def test_text_holding_guillemets_is_marked_once(alice, chat):
    Message.objects.create(session=chat, role="tool", tool_name="session_search",
                           tool_call_id="toolu_1", content="match: «README» was read")
    [hit] = message_search(user=alice, query="README")
    assert hit.snippet.count("«") == hit.snippet.count("»") == 1
    assert "‹«README»›" in hit.snippet


def test_search_page_shows_one_mark_per_match(login, alice, chat):
    Message.objects.create(session=chat, role="assistant",
                           content="Read «README» then README.md, and README again.")
    page = login(alice).get(reverse("search"), {"q": "readme"}).content.decode()
    excerpt = re.search(r'<p class="excerpt">(.*?)</p>', page, re.S).group(1)
    assert "<mark><mark>" not in excerpt and "</mark></mark>" not in excerpt
    assert excerpt.count("<mark>") == excerpt.count("</mark>") >= 2
    assert "‹<mark>README</mark>›" in excerpt


def test_plain_text_keeps_its_single_marks_and_the_tool_sees_them(alice, chat):
    Message.objects.create(session=chat, role="user", content="the zebra is striped")
    other = session_create(user=alice, title="Other")
    [hit] = message_search(user=alice, query="zebra")
    assert "«zebra» is striped" in hit.snippet
    [found] = session_search_for_tool(session=other, query="zebra")
    assert found["snippet"] == hit.snippet
