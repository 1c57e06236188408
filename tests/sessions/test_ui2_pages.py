"""A new user's findings on two pages (through the Django test client):

- /search/ with a 5,000-character query showed nothing under the box, not even "No messages
  match": the form refused the query and the page treated it as empty;
- GET /sessions/<id>/messages/ (a POST endpoint, opened from the address bar or history)
  answered 405 with an empty body, which Chrome shows as its own error page.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from sessions.forms import SearchForm
from sessions.services import session_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(make_user, hermes_settings):
    return make_user("alice")


def test_a_too_long_search_says_so(alice, login):
    limit = SearchForm.base_fields["q"].max_length
    response = login(alice).get(reverse("search"), {"q": "x" * 5000})
    assert response.status_code == 200
    page = response.content.decode()
    assert f"too long: at most {limit} characters" in page
    assert 'role="alert"' in page


def test_a_search_at_the_limit_still_runs(alice, login):
    limit = SearchForm.base_fields["q"].max_length
    page = login(alice).get(reverse("search"), {"q": "x" * limit}).content.decode()
    assert "No messages match." in page
    assert "too long" not in page


def test_opening_the_send_address_shows_a_page_that_leads_back(alice, login):
    """A form's address opened in the browser: still 405 (a wrong method reveals nothing,
    tests/approvals/test_access_matrix.py), but a readable page linking to the session,
    where a bare 405 showed the browser's own error page."""
    chat = session_create(user=alice, title="Notes")
    response = login(alice).get(reverse("message_send", args=[chat.pk]),
                                HTTP_ACCEPT="text/html,application/xhtml+xml")
    assert response.status_code == 405 and "POST" in response["Allow"]
    page = response.content.decode()
    assert "Not a page" in page and f'href="/sessions/{chat.pk}/"' in page


def test_another_users_send_address_gives_the_same_405(alice, login, make_user):
    chat = session_create(user=make_user("bob"), title="Private")
    response = login(alice).get(reverse("message_send", args=[chat.pk]),
                                HTTP_ACCEPT="text/html")
    assert response.status_code == 405 and "Private" not in response.content.decode()
