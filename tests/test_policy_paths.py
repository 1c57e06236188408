"""No path reaches a tool without passing the one policy function (issue 5, "Done when").

Two halves:

- architecture (AST, no Django): every ``.run(`` call in the application is either the one in
  agents/tools/dispatch.py::execute_call (a tool, reached only after the gate), a tool's own
  body calling its command backend, or a backend calling itself; ``execute_call`` is used
  only by the dispatcher; ``dispatch_tool_calls`` is called only by the runner, always with
  ``gate=toolbox.policy_gate(...)``, and that gate calls ``agents.policy.decide``; processes
  are spawned only in agents/backends/.
- behaviour (real database, simulator, channel layer): a dangerous command asked through the
  CLI (``hermes chat``), the websocket "message" frame and the HTTP message view each
  enqueues the same ``turn_run_task``; running what was enqueued stores an ApprovalRequest
  with the policy's own rule, and nothing runs.
"""

from __future__ import annotations

import ast
import io
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
APP_PACKAGES = ("agents", "sessions", "approvals", "accounts", "hermes_web")
DANGEROUS = "rm -rf build"


# --- architecture ------------------------------------------------------------------------

def app_modules() -> dict[str, ast.Module]:
    """{relative path: parsed module} of every application module (tests excluded)."""
    modules = {}
    for package in APP_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            rel = path.relative_to(ROOT).as_posix()
            modules[rel] = ast.parse(path.read_text(), filename=rel)
    return modules


def calls_with_scope(tree: ast.Module):
    """Yield (call, enclosing function names outermost first, enclosing class names)."""

    def walk(node: ast.AST, funcs: tuple[str, ...], classes: tuple[str, ...]):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield from walk(child, funcs + (child.name,), classes)
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, funcs, classes + (child.name,))
            else:
                if isinstance(child, ast.Call):
                    yield child, funcs, classes
                yield from walk(child, funcs, classes)

    yield from walk(tree, (), ())


def called_name(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def run_call_verdict(path: str, receiver: str, funcs: tuple[str, ...],
                     classes: tuple[str, ...]) -> str | None:
    """Why this ``<receiver>.run(...)`` is allowed, or None if it is a way around the gate."""
    if path == "agents/tools/dispatch.py" and receiver == "tool" and funcs == ("execute_call",):
        return "the gated call"
    if (path.startswith("agents/tools/") and "backend" in receiver and classes
            and funcs[:1] == ("run",)):
        return "a tool's own body running its command (reached only through execute_call)"
    if path.startswith("agents/backends/") and "Backend" in receiver:
        return "a backend probing itself with a fixed command"
    if path.startswith("simulator/"):
        return "the provider simulator (serves HTTP, runs no tools)"
    if path == "agents/mcp_client.py" and receiver == "asyncio" and funcs == ("probe_server",):
        return "an event loop listing an MCP server's tools (a call of one goes through the " \
               "dispatcher like any tool)"
    return None


def test_every_run_call_is_the_gated_one_or_inside_a_tool_or_backend():
    found, offenders = [], []
    for path, tree in app_modules().items():
        for call, funcs, classes in calls_with_scope(tree):
            if not (isinstance(call.func, ast.Attribute) and call.func.attr == "run"):
                continue
            receiver = ast.unparse(call.func.value)
            why = run_call_verdict(path, receiver, funcs, classes)
            found.append((path, receiver, why))
            if why is None:
                offenders.append(f"{path}:{call.lineno} {receiver}.run(...) in "
                                 f"{'.'.join(classes + funcs) or '<module>'}")
    assert ("agents/tools/dispatch.py", "tool", "the gated call") in found
    assert any(p == "agents/tools/terminal.py" for p, _, _ in found)
    assert offenders == [], "tool or command run outside the dispatcher: " + "; ".join(offenders)


def test_execute_call_is_used_only_by_the_dispatcher():
    users = sorted({path for path, tree in app_modules().items()
                    for node in ast.walk(tree)
                    if isinstance(node, (ast.Name, ast.Attribute, ast.alias))
                    and "execute_call" in (getattr(node, "id", None), getattr(node, "attr", None),
                                           getattr(node, "name", None))})
    # execute_code's RPC (a script's tool calls) runs tools too, after the same gate.
    assert users == ["agents/tools/code_rpc.py", "agents/tools/dispatch.py"]
    rpc = app_modules()["agents/tools/code_rpc.py"]
    order = [called_name(c) for c, funcs, _ in calls_with_scope(rpc)
             if funcs == ("code_rpc_handler", "handle")
             and called_name(c) in ("gate", "execute_call")]
    assert order == ["gate", "execute_call"], order


def test_dispatch_is_called_only_by_the_runner_and_always_with_the_policy_gate():
    modules = app_modules()
    callers = []
    for path, tree in modules.items():
        for call, funcs, _ in calls_with_scope(tree):
            if called_name(call) != "dispatch_tool_calls":
                continue
            gate = next((k.value for k in call.keywords if k.arg == "gate"), None)
            callers.append((path, funcs, isinstance(gate, ast.Call) and called_name(gate)))
    assert callers == [("sessions/runner.py", ("_execute",), "policy_gate")]

    # The gate it gets (toolbox.policy_gate → sessions/gate.py) calls agents.policy.decide,
    # and the runner's execute is that function.
    toolbox = modules["sessions/toolbox.py"]
    assert "policy_gate" in [called_name(c) for c, funcs, _ in calls_with_scope(toolbox)
                             if funcs[:1] == ("policy_gate",)]
    gate_calls = [called_name(c) for c, funcs, _ in calls_with_scope(modules["sessions/gate.py"])
                  if funcs[:1] == ("policy_gate",)]
    assert "decide" in gate_calls
    runner = modules["sessions/runner.py"]
    harness = [c for c, _, _ in calls_with_scope(runner) if called_name(c) == "Harness"]
    assert len(harness) == 1
    execute = next(k.value for k in harness[0].keywords if k.arg == "execute")
    assert "_execute(" in ast.unparse(execute)


def test_processes_are_spawned_only_by_the_command_backends():
    spawners = {"Popen", "system", "spawnv", "spawnvp", "execv", "execvp", "check_output",
                "check_call", "call", "getoutput", "create_subprocess_exec",
                "create_subprocess_shell"}
    offenders = []
    for path, tree in app_modules().items():
        imports_subprocess = any(
            isinstance(n, (ast.Import, ast.ImportFrom))
            and ("subprocess" in [a.name for a in n.names] or getattr(n, "module", "") in
                 ("subprocess", "pty"))
            for n in ast.walk(tree))
        if path.startswith("agents/backends/"):
            continue
        for call, _, _ in calls_with_scope(tree):
            receiver = (ast.unparse(call.func.value) if isinstance(call.func, ast.Attribute)
                        else "")
            if called_name(call) in spawners and receiver in ("subprocess", "os", "asyncio"):
                offenders.append(f"{path}:{call.lineno}")
        if imports_subprocess:
            offenders.append(f"{path} imports subprocess")
    assert offenders == []


# --- behaviour: three entry points, one task, one gate -----------------------------------

APPS = ["django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes",
        "django.contrib.sessions", "django.contrib.messages", "django.contrib.staticfiles",
        "django.contrib.humanize",
        "channels", "django_htmx", "template_partials", "axes", "accounts", "sessions",
        "approvals"]
ORIGIN = (b"origin", b"http://127.0.0.1:8000")


@pytest.fixture
def owner(make_user, hermes_settings, settings):
    from sessions import toolbox

    hermes_settings.HERMES = {**hermes_settings.HERMES, "BACKEND": "local",
                              "RETRY_BASE_DELAY": 0.01, "SIMULATOR_EMBEDDED": False}
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    toolbox.backend_kind.cache_clear()
    yield make_user("alice", team="red")
    toolbox.backend_kind.cache_clear()


@pytest.fixture
def scripted(simulator):
    from simulator.script import Reply, Script, ScriptRule, ToolCallSpec

    simulator.state.script = Script([
        ScriptRule(tool_result=".", reply=Reply(text="done")),
        ScriptRule(user="clean", reply=Reply(text="Cleaning.", tool_calls=(
            ToolCallSpec(name="terminal", input={"command": DANGEROUS}),))),
    ])
    return simulator


@pytest.fixture
def published():
    """Every task message published through Celery (its own signal), as (name, args)."""
    from celery.signals import before_task_publish

    seen: list[tuple[str, list]] = []

    def record(sender=None, body=None, **kwargs):
        seen.append((sender, list(body[0]) if isinstance(body, (list, tuple)) else body))

    before_task_publish.connect(record, weak=False)
    yield seen
    before_task_publish.disconnect(record)


def prepared_session(user):
    from sessions.services import session_create, workspace_path

    session = session_create(user=user)
    build = workspace_path(session) / "build"
    build.mkdir()
    (build / "keep.txt").write_text("artefact")
    return session, build


def run_what_was_enqueued(published, session) -> None:
    """Run exactly the task the entry point enqueued, as a worker would."""
    from sessions.tasks import turn_run_task

    mine = [args for name, args in published if args == [session.pk]]
    assert mine, f"nothing enqueued for session {session.pk}: {published}"
    assert {name for name, args in published if args == [session.pk]} == {turn_run_task.name}
    turn_run_task.apply(args=mine[0])


def assert_gated(session, build) -> None:
    from agents.policy import check_command
    from approvals.models import ApprovalRequest
    from sessions.models import Message, Turn
    from sessions.toolbox import policy_context_for

    approval = ApprovalRequest.objects.get(session=session)
    expected = check_command(DANGEROUS, policy_context_for(user=session.owner, session=session))
    assert (approval.state, approval.command) == ("pending", DANGEROUS)
    assert (approval.rule, approval.risk_class) == (expected.rule, expected.risk_class)
    assert expected.verdict == "ask"
    assert Turn.objects.get(session=session).status == Turn.Status.AWAITING_APPROVAL
    assert not Message.objects.filter(session=session, role="tool").exists()
    assert (build / "keep.txt").read_text() == "artefact"


@pytest.mark.django_db(transaction=True, available_apps=APPS)
def test_cli_chat_goes_through_the_task_and_the_gate(owner, scripted, published, worker):
    from django.core.management import call_command

    session, build = prepared_session(owner)
    out = io.StringIO()
    call_command("hermes", "chat", "please clean the build", "--session", str(session.pk),
                 "--user", "alice", stdout=out)
    assert "awaiting approval" in out.getvalue()
    assert [args for _, args in published] == [[session.pk]]  # turn_start's enqueue
    assert_gated(session, build)


@pytest.mark.django_db(transaction=True, available_apps=APPS)
def test_http_message_view_goes_through_the_task_and_the_gate(owner, scripted, published,
                                                              login):
    from django.urls import reverse

    session, build = prepared_session(owner)
    response = login(owner).post(reverse("message_send", args=[session.pk]),
                                 {"text": "please clean the build"})
    assert response.status_code == 302
    run_what_was_enqueued(published, session)
    assert_gated(session, build)


@pytest.mark.django_db(transaction=True, available_apps=APPS)
def test_websocket_message_goes_through_the_task_and_the_gate(owner, scripted, published,
                                                              client):
    from asgiref.sync import async_to_sync
    from channels.auth import AuthMiddlewareStack
    from channels.routing import URLRouter
    from channels.security.websocket import AllowedHostsOriginValidator
    from channels.testing import WebsocketCommunicator
    from django.conf import settings

    from sessions.routing import websocket_urlpatterns

    session, build = prepared_session(owner)
    client.force_login(owner, backend="django.contrib.auth.backends.ModelBackend")
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    app = AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))

    async def scenario():
        ws = WebsocketCommunicator(app, f"/ws/sessions/{session.pk}/",
                                   headers=[ORIGIN, (b"cookie", cookie.encode())])
        connected, _ = await ws.connect(timeout=10)
        assert connected
        await ws.send_json_to({"type": "hello", "last_seq": 0})
        await ws.send_json_to({"type": "message", "text": "please clean the build"})
        frame = await ws.receive_json_from(timeout=5)
        assert frame["type"] == "turn.queued"
        await ws.disconnect()

    async_to_sync(scenario)()
    run_what_was_enqueued(published, session)
    assert_gated(session, build)
