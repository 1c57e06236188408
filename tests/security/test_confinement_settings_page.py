"""Issue 8 build item 3: the Settings page says which confinement is in force, from the one
backend selector (sessions.toolbox.backend_kind) the tools and the policy use too."""

from __future__ import annotations

import pytest
from django.conf import settings

from agents.backends.confine import landlock_abi
from agents.backends.sandbox import sandbox_available
from sessions import toolbox

pytestmark = pytest.mark.django_db


@pytest.fixture
def page(make_user, login, hermes_settings):
    def get(**hermes):
        hermes_settings.HERMES = {**hermes_settings.HERMES, **hermes}
        toolbox.backend_kind.cache_clear()
        response = login(make_user(f"u{len(hermes_settings.HERMES)}{hermes}"[:30]
                                   .replace(" ", ""))).get("/settings/")
        assert response.status_code == 200
        return response.content.decode()

    yield get
    toolbox.backend_kind.cache_clear()


@pytest.mark.skipif(not sandbox_available(), reason="bubblewrap unusable here")
def test_sandbox_is_named(page):
    html = page(BACKEND="sandbox")
    assert 'data-kind="sandbox"' in html and "sandbox (bubblewrap)" in html
    assert toolbox.backend_kind() == "sandbox"


@pytest.mark.skipif(landlock_abi() == 0, reason="no Landlock on this kernel")
def test_local_with_landlock_is_named_with_its_abi(page):
    html = page(BACKEND="local", LOCAL_CONFINEMENT="auto")
    assert 'data-kind="landlock"' in html and f"local + Landlock (ABI {landlock_abi()})" in html
    backend = toolbox.backend_for(settings.DATA_DIR)
    assert backend.name == "local" and backend.confinement == "landlock"


def test_local_without_confinement_says_policy_only(page):
    html = page(BACKEND="local", LOCAL_CONFINEMENT="none")
    assert 'data-kind="policy"' in html and "local, policy only" in html
    assert toolbox.backend_for(settings.DATA_DIR).confinement == "none"


def test_auto_agrees_with_what_the_tools_get(page, tmp_path):
    html = page(BACKEND="auto", LOCAL_CONFINEMENT="auto")
    kind = toolbox.backend_kind()
    assert toolbox.backend_for(tmp_path).name == kind
    assert f'id="setting-backend">{kind}' in html


def test_a_demanded_sandbox_that_cannot_run_is_reported_not_a_500(page, monkeypatch):
    """Issue 11 item 3: the page and the runner read one selector; where the runner would
    refuse every command (HERMES_BACKEND=sandbox without a working bubblewrap), the page
    says so instead of claiming "local" or failing."""
    import pytest as _pytest

    from agents.backends import BackendUnavailable
    from sessions import backends

    monkeypatch.setattr(backends, "sandbox_available", lambda: False)
    html = page(BACKEND="sandbox")
    assert 'data-kind="unavailable"' in html and 'id="setting-backend">unavailable' in html
    with _pytest.raises(BackendUnavailable):
        toolbox.backend_for(settings.DATA_DIR)
