"""A new user's finding: the Settings page said "demo · demo" (the demo user's name, then its
team's name, unlabelled). Each value on the page now says what it is."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from django.utils.html import strip_tags

from accounts.models import Membership, Team

pytestmark = pytest.mark.django_db


def _settings_text(client) -> str:
    """The settings list as a person reads it: "term: value", tags dropped, whitespace
    collapsed."""
    page = client.get(reverse("settings")).content.decode()
    block = re.search(r'<dl class="settings">(.*?)</dl>', page, re.DOTALL).group(1)
    return " ".join(strip_tags(block.replace("</dt>", ": ")).split())


def test_the_demo_user_and_its_team_are_labelled(make_user, login, hermes_settings):
    """The demo account (manage.py demo_user): user "demo", admin of team "demo"."""
    demo = make_user("demo", team="demo", role="admin", staff=True)
    text = _settings_text(login(demo))
    assert "demo · demo" not in text
    assert "Signed in as: user demo" in text
    assert "Your teams: team demo: you are an admin (members, approval policy, MCP servers)" \
        in text, text
    assert ("Provider: simulator the built-in simulator, not a real model (scripted replies: "
            "type “help” in a chat) · HERMES_PROVIDER") in text, text
    assert "Model: hermes-simulator (new sessions start with it" in text, text


def test_a_member_of_two_teams_and_a_teamless_user(make_user, login, hermes_settings):
    bob = make_user("bob", team="red")
    make_user("carol", team="blue", role="admin")
    Membership.objects.create(user=bob, team=Team.objects.get(name="blue"))
    text = _settings_text(login(bob))
    assert "Your teams: team red: you are a member; team blue: you are a member" in text, text
    loner = make_user("dave")
    assert "Your teams: none Provider:" in _settings_text(login(loner))
