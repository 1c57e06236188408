"""The access matrix (issue 5 item 7), generated from the URL conf and the websocket routes:
two users in two teams plus a team admin × every route × an object → the expected status.

Routes are found by walking ``get_resolver()`` recursively, so a new route that is missing
from ``EXPECTED`` fails ``test_every_route_has_an_expectation``. Object routes get their int
kwargs from ``OBJECT_KWARGS`` (ids of objects owned by alice); an unknown kwarg fails too.
Actors: owner (alice, member of A), other (bob, member of B), admin (carol, admin of A, on
alice's objects), admin_on_b (carol on bob's objects), anon. Every request runs in a
savepoint that is rolled back, so one actor's POST never changes what the next one sees.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from django.apps import apps
from asgiref.sync import async_to_sync
from django.db import transaction
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from approvals.models import ApprovalRule
from approvals.services import approval_decide
from sessions.mcp_models import McpServer

LOGIN = "login"
"""Expected "302 to the login page" (anonymous users)."""
ACTORS = ("owner", "other", "admin", "anon")


@dataclass(frozen=True, slots=True, kw_only=True)
class Expect:
    """One route's row: the method and form data it is exercised with, and the status per
    actor. ``admin_on_b`` is implied: 404 on every object route."""

    method: str
    owner: int | str
    other: int | str
    admin: int | str
    anon: int | str = LOGIN
    data: dict | None = None


# Object routes: the other team's user is always 404; the team admin reads (200) and decides
# approvals / revokes rules of their team, but never writes in a member's session (404).
EXPECTED: dict[str, Expect] = {
    "login": Expect(method="GET", owner=302, other=302, admin=302, anon=200),
    "logout": Expect(method="POST", owner=302, other=302, admin=302, anon=LOGIN),
    "settings": Expect(method="GET", owner=200, other=200, admin=200),
    # an invitation is answered by the invited user only (a team admin cannot answer for them)
    "invitation_answer": Expect(method="POST", owner=302, other=404, admin=404,
                                data={"answer": "decline"}),
    "favicon": Expect(method="GET", owner=301, other=301, admin=301, anon=301),
    "session_list": Expect(method="GET", owner=200, other=200, admin=200),
    "session_create": Expect(method="POST", owner=302, other=302, admin=302),
    "search": Expect(method="GET", owner=200, other=200, admin=200),
    "session_detail": Expect(method="GET", owner=200, other=404, admin=200),
    "event_list": Expect(method="GET", owner=200, other=404, admin=200),
    "session_export": Expect(method="GET", owner=200, other=404, admin=200),
    "session_children": Expect(method="GET", owner=200, other=404, admin=200),
    "message_send": Expect(method="POST", owner=302, other=404, admin=404,
                           data={"text": "hello"}),
    "message_steer": Expect(method="POST", owner=302, other=404, admin=404,
                            data={"text": "a correction"}),
    "turn_stop": Expect(method="POST", owner=302, other=404, admin=404),
    "session_rename": Expect(method="POST", owner=302, other=404, admin=404,
                             data={"title": "renamed"}),
    "session_archive": Expect(method="POST", owner=302, other=404, admin=404),
    # the confirmation page (a POST would delete the world's session for the rows after it;
    # the POST's own matrix is tests/sessions/test_delete.py)
    "session_delete": Expect(method="GET", owner=200, other=404, admin=404),
    "session_rewind": Expect(method="POST", owner=302, other=404, admin=404),
    # the interface (issue 14): writes are the owner's; reads (gauge, files) the team admin's too
    "message_edit": Expect(method="POST", owner=302, other=404, admin=404,
                           data={"message_id": "1", "text": "edited"}),
    "turn_regenerate": Expect(method="POST", owner=302, other=404, admin=404),
    "session_fork": Expect(method="POST", owner=302, other=404, admin=404,
                           data={"message_id": "1"}),
    "session_pin": Expect(method="POST", owner=302, other=404, admin=404),
    "session_model": Expect(method="POST", owner=302, other=404, admin=404,
                            data={"choice": "simulator|hermes-simulator"}),
    "session_gauge": Expect(method="GET", owner=200, other=404, admin=200),
    "session_files": Expect(method="GET", owner=200, other=404, admin=200),
    "file_download": Expect(method="GET", owner=404, other=404, admin=404),  # no ?path
    "file_upload": Expect(method="POST", owner=302, other=404, admin=404),
    "message_raw": Expect(method="GET", owner=404, other=404, admin=404),  # no ?message
    "password_change": Expect(method="GET", owner=200, other=200, admin=200),
    "team_members": Expect(method="GET", owner=404, other=404, admin=200),
    "people": Expect(method="GET", owner=404, other=404, admin=404),  # staff only
    "sidebar": Expect(method="GET", owner=200, other=200, admin=200),
    "approval_queue": Expect(method="GET", owner=200, other=200, admin=200),
    "approval_rules": Expect(method="GET", owner=200, other=200, admin=200),
    "approval_decide": Expect(method="POST", owner=302, other=404, admin=302,
                              data={"choice": "deny", "reason": "matrix"}),
    # one request's arguments in full: its reviewers (owner, team admin) only
    "approval_arguments": Expect(method="GET", owner=200, other=404, admin=200),
    "approval_rule_revoke": Expect(method="POST", owner=302, other=404, admin=302),
    "session_bypass": Expect(method="POST", owner=302, other=404, admin=404,
                             data={"enabled": "on"}),
    # money (issue 9): /spend/ is everyone's own; team routes are the team admin's
    "spend": Expect(method="GET", owner=200, other=200, admin=200),
    "spend_members_csv": Expect(method="GET", owner=404, other=404, admin=200),
    "budget_set": Expect(method="POST", owner=404, other=404, admin=302,
                         data={"scope": "team", "period": "day", "limit": "5",
                               "unknown_policy": "block"}),
    "turn_budget_resume": Expect(method="POST", owner=302, other=404, admin=404),
    # a team's approval policy: its admins only (a plain member sees a 404 too)
    "team_settings": Expect(method="GET", owner=404, other=404, admin=200),
    # a team's MCP servers (issue 13): its admins only
    "team_mcp": Expect(method="GET", owner=404, other=404, admin=200),
    "team_mcp_edit": Expect(method="GET", owner=404, other=404, admin=200),
    "team_mcp_delete": Expect(method="POST", owner=404, other=404, admin=302),
    # schedules and webhooks (issue 12): the owner's alone; a team admin sees the session
    # and its turns, not the member's schedules or webhook secrets
    "schedule_list": Expect(method="GET", owner=200, other=200, admin=200),
    "schedule_preview": Expect(method="GET", owner=200, other=200, admin=200),
    "schedule_detail": Expect(method="GET", owner=200, other=404, admin=404),
    "schedule_action": Expect(method="POST", owner=302, other=404, admin=404),
    "webhook_list": Expect(method="GET", owner=200, other=200, admin=200),
    "webhook_detail": Expect(method="GET", owner=200, other=404, admin=404),
    "webhook_action": Expect(method="POST", owner=302, other=404, admin=404),
    # the inbound URL needs no login: its signature is the authentication (none here: 400)
    "webhook_inbound": Expect(method="POST", owner=400, other=400, admin=400, anon=400),
    # issue 13: memory is everyone's own page; the todo panel and a clarify question read
    # like the session (owner, team admin); only the owner answers a question
    "memory": Expect(method="GET", owner=200, other=200, admin=200),
    "todo_panel": Expect(method="GET", owner=200, other=404, admin=200),
    "clarify_card": Expect(method="GET", owner=200, other=404, admin=200),
    "clarify_answer": Expect(method="POST", owner=302, other=404, admin=404,
                             data={"answer": "matrix"}),
}
WEBSOCKET_EXPECTED = {
    # route pattern → per actor: True (accepted) or the close code.
    "ws/sessions/<int:session_id>/": {"owner": True, "other": 4404, "admin": True,
                                      "anon": 4401, "admin_on_b": 4404},
    # Any other path (here "/^"): closed 4404 for everyone, never a router exception.
    "^": {"owner": 4404, "other": 4404, "admin": 4404, "anon": 4404, "admin_on_b": 4404},
}
ADMIN_NAMESPACE = "admin"
"""Every Django admin route: 302 to the admin login for non-staff and anonymous users,
except the login page itself (200) and logout (302 to the index, which sends to login)."""
UNNAMED_ALLOWED = re.compile(r"^admin/")
"""The admin's catch-all is the only route allowed without a name."""
ADMIN_KWARGS = {"app_label": "approvals", "content_type_id": "1"}


@dataclass(frozen=True, slots=True)
class Route:
    name: str  # qualified, e.g. "admin:index"
    route: str
    kwargs: tuple[tuple[str, str], ...]  # (name, "int" | "str")


def _kwarg_kinds(pattern) -> list[tuple[str, str]]:
    converters = getattr(pattern, "converters", None)
    if converters:
        return [(k, "int" if type(v).__name__ == "IntConverter" else "str")
                for k, v in converters.items()]
    regex = getattr(pattern, "regex", None)
    return [(k, "str") for k in (regex.groupindex if regex is not None else {})]


def walk(resolver=None, prefix: str = "", namespace: tuple[str, ...] = ()) -> list[Route]:
    """Every URLPattern under ``resolver``, with its qualified name and kwargs."""
    resolver = resolver or get_resolver()
    routes = []
    for entry in resolver.url_patterns:
        if isinstance(entry, URLResolver):
            ns = namespace + ((entry.namespace,) if entry.namespace else ())
            routes += walk(entry, prefix + str(entry.pattern), ns)
        elif isinstance(entry, URLPattern):
            name = ":".join(namespace + (entry.name,)) if entry.name else ""
            kinds = _kwarg_kinds(entry.pattern)
            routes.append(Route(name, prefix + str(entry.pattern), tuple(kinds)))
    return routes


@pytest.fixture
def world(people, session_a, session_b, ask):
    """Alice's and bob's objects: a session, a pending approval, an "always" rule, a schedule
    and a webhook each."""
    from schedules.services import schedule_create
    from webhooks.services import webhook_create

    objects = {}
    for owner, (session, turn) in (("alice", session_a), ("bob", session_b)):
        rule_source = ask(session, turn, command=f"make deploy-{owner}")
        approval_decide(user=people[owner], approval_id=rule_source.pk, choice="always")
        from sessions.models import ClarifyQuestion

        question = ClarifyQuestion.objects.create(session=session, turn=turn,
                                                  tool_call_id=f"q-{owner}", question="Which?")
        objects[owner] = {"session_id": session.pk, "approval_id": ask(session, turn).pk,
                          "rule_id": ApprovalRule.objects.get(user=people[owner]).pk,
                          "team_id": session.team_id, "question_id": question.pk,
                          "server_id": McpServer.objects.create(
                              team_id=session.team_id, name=f"srv-{owner}", transport="stdio",
                              command="true").pk}
        from accounts.models import Team, TeamInvitation

        objects[owner]["invitation_id"] = TeamInvitation.objects.create(
            team=Team.objects.create(name=f"inviting-{owner}"), user=people[owner]).pk
        schedule = schedule_create(user=people[owner], name="m", prompt="p", kind="cron",
                                   cron_expression="0 * * * *", target="session",
                                   session=session)
        hook = webhook_create(user=people[owner], session=session, name="m")
        objects[owner].update(schedule_id=schedule.pk, webhook_id=hook.pk, token=hook.token)
    return objects


STR_KWARGS = {"schedule_action": {"action": "pause"}, "webhook_action": {"action": "rotate"}}
"""Sample values of the routes' str kwargs (the webhook token comes from ``world``)."""


def _url(route: Route, ids: dict[str, int]) -> str:
    kwargs = {}
    for name, kind in route.kwargs:
        if route.name.startswith(ADMIN_NAMESPACE + ":"):
            kwargs[name] = ADMIN_KWARGS.get(name, str(ids["approval_id"]))
        elif kind == "int" and name in ids:
            kwargs[name] = ids[name]
        elif kind == "str" and name in STR_KWARGS.get(route.name, {}):
            kwargs[name] = STR_KWARGS[route.name][name]
        elif kind == "str" and name in ids:
            kwargs[name] = ids[name]
        else:
            raise AssertionError(f"route {route.name} ({route.route}): no sample value for "
                                 f"kwarg {name!r}; add it to the matrix")
    return reverse(route.name, kwargs=kwargs)


def _request(user, method: str, url: str, data: dict | None):
    """Status and Location of one request, in a savepoint rolled back afterwards."""
    with transaction.atomic():
        client = Client(raise_request_exception=False)
        if user is not None:
            client.force_login(user, backend="django.contrib.auth.backends.ModelBackend")
        response = (client.get(url) if method == "GET"
                    else client.post(url, data or {}))
        transaction.set_rollback(True)
    return response.status_code, response.get("Location", "")


def _matches(expected, status: int, location: str, login_url: str) -> bool:
    if expected == LOGIN:
        return status == 302 and location.startswith(login_url)
    return status == expected


def test_every_route_has_an_expectation():
    """A route added to the URL conf without a row here fails (named or not)."""
    routes = walk()
    unnamed = [r.route for r in routes if not r.name and not UNNAMED_ALLOWED.match(r.route)]
    assert unnamed == [], f"unnamed routes cannot be checked: {unnamed}"
    app_routes = {r.name for r in routes if r.name and not r.name.startswith("admin:")}
    assert app_routes - EXPECTED.keys() == set(), "routes missing from EXPECTED"
    assert EXPECTED.keys() - app_routes == set(), "EXPECTED lists routes that no longer exist"
    from sessions.routing import websocket_urlpatterns

    assert {str(p.pattern) for p in websocket_urlpatterns} == WEBSOCKET_EXPECTED.keys()
    assert len([r for r in routes if r.name.startswith("admin:")]) > 10


@pytest.mark.parametrize("actor", ACTORS + ("admin_on_b",))
def test_http_matrix(actor, people, world):
    users = {"owner": people["alice"], "other": people["bob"], "admin": people["carol"],
             "admin_on_b": people["carol"], "anon": None}
    ids = world["bob"] if actor == "admin_on_b" else world["alice"]
    login_url = reverse("login")
    failures = []
    checked = 0
    for route in walk():
        if not route.name or route.name.startswith(ADMIN_NAMESPACE + ":"):
            continue
        row = EXPECTED[route.name]
        is_object = any(kind == "int" for _, kind in route.kwargs)
        if actor == "admin_on_b" and not is_object:
            continue
        expected = 404 if actor == "admin_on_b" else getattr(row, actor)
        url = _url(route, ids)
        status, location = _request(users[actor], row.method, url, row.data)
        checked += 1
        if not _matches(expected, status, location, login_url):
            failures.append(f"{row.method} {url} ({route.name}) as {actor}: "
                            f"{status} {location}, expected {expected}")
        if is_object and actor == "other":
            assert expected == 404, f"{route.name}: another team's object must be a 404"
        if row.method == "POST" and users[actor] is not None:
            # The wrong method reveals nothing either: 405 for everybody, before any lookup.
            get_status, _ = _request(users[actor], "GET", url, None)
            if get_status != 405:
                failures.append(f"GET {url} ({route.name}) as {actor}: {get_status}, "
                                f"expected 405")
    assert checked >= (10 if actor == "admin_on_b" else len(EXPECTED))
    assert failures == []


@pytest.mark.parametrize("actor", ("owner", "other", "admin", "anon"))
def test_django_admin_is_for_staff_only(actor, people, world):
    users = {"owner": people["alice"], "other": people["bob"], "admin": people["carol"],
             "anon": None}
    admin_login = reverse("admin:login")
    failures = []
    routes = [r for r in walk() if r.name.startswith(ADMIN_NAMESPACE + ":")]
    for route in routes:
        url = _url(route, world["alice"])
        status, location = _request(users[actor], "GET", url, None)
        if route.name == "admin:login":
            expected_ok = status == 200
        elif route.name == "admin:logout":  # non-staff are sent to the index, then login
            expected_ok = status == 302 and location == reverse("admin:index")
        else:
            expected_ok = status == 302 and location.startswith(admin_login)
        if not expected_ok:
            failures.append(f"{url} ({route.name}) as {actor}: {status} {location}")
    assert failures == [] and len(routes) > 10


def test_staff_reach_the_django_admin(make_user, world):
    staff = make_user("sam", staff=True)
    staff.is_superuser = True
    staff.save(update_fields=["is_superuser"])
    for name in ("admin:index", "admin:approvals_auditentry_changelist",
                 "admin:approvals_approvalrequest_changelist"):
        assert _request(staff, "GET", reverse(name), None)[0] == 200, name
    # The audit log is read-only even for a superuser.
    assert _request(staff, "GET", reverse("admin:approvals_auditentry_add"), None)[0] == 403


def test_other_users_and_unknown_ids_look_the_same(people, world):
    """A 404 for another team's object is indistinguishable from a missing one."""
    missing = {k: v + 10_000 if isinstance(v, int) else v for k, v in world["alice"].items()}
    for route in walk():
        if route.name not in EXPECTED or not any(kind == "int" for _, kind in route.kwargs):
            continue
        row = EXPECTED[route.name]
        foreign = _request(people["bob"], row.method, _url(route, world["alice"]), row.data)
        unknown = _request(people["bob"], row.method, _url(route, missing), row.data)
        assert foreign == unknown == (404, ""), route.name


# --- websocket routes ------------------------------------------------------------------

WS_APPS = [config.name for config in apps.get_app_configs()]


@pytest.mark.django_db(transaction=True, available_apps=WS_APPS)
def test_websocket_matrix(people, world, settings):
    """Every websocket route × actor: accepted or closed with the expected code; a foreign
    Origin is refused before authentication."""
    from channels.testing import WebsocketCommunicator

    # Importing the ASGI module starts the embedded worker and simulator when the broker is
    # in-memory (hermes_web/embedded.py); this test wants only the routing stack.
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    settings.HERMES = {**settings.HERMES, "SIMULATOR_EMBEDDED": False}
    from hermes_web.asgi import application

    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    users = {"owner": people["alice"], "other": people["bob"], "admin": people["carol"],
             "admin_on_b": people["carol"], "anon": None}
    failures = []

    async def attempt(path: str, cookie: str, origin: str) -> object:
        headers = [(b"origin", origin.encode()), (b"host", b"127.0.0.1")]
        if cookie:
            headers.append((b"cookie", cookie.encode()))
        communicator = WebsocketCommunicator(application, path, headers=headers)
        connected, code = await communicator.connect(timeout=5)
        await communicator.disconnect()
        return True if connected else code

    from sessions.routing import websocket_urlpatterns

    for pattern in websocket_urlpatterns:
        route = str(pattern.pattern)
        for actor, expected in WEBSOCKET_EXPECTED[route].items():
            ids = world["bob"] if actor == "admin_on_b" else world["alice"]
            path = "/" + re.sub(r"<int:(\w+)>", lambda m: str(ids[m.group(1)]), route)
            cookie = ""
            if users[actor] is not None:
                client = Client()
                client.force_login(users[actor],
                                   backend="django.contrib.auth.backends.ModelBackend")
                cookie = f"sessionid={client.cookies['sessionid'].value}"
            got = async_to_sync(attempt)(path, cookie, "http://127.0.0.1")
            if got != expected:
                failures.append(f"{path} as {actor}: {got}, expected {expected}")
            if actor == "owner":
                foreign = async_to_sync(attempt)(path, cookie, "http://evil.example")
                if foreign is True:
                    failures.append(f"{path} as owner from a foreign origin was accepted")
    assert failures == []
