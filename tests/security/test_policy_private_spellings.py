"""Issue 8 finding 2 "by any spelling", through real turns: the spellings a tester found
allowed (``dd if=PATH``, ``find / -exec``, paths inside ``python3 -c`` code, ``git -C``) and
the kinds behind them, on the real deployment layout (tests/security/conftest.py: the
app's data dir with its database and secret key, every workspace under it) and the local
backend. Each asserts the call asks or is denied and, on disk, that nothing ran.
"""

from __future__ import annotations

import pytest

from approvals.models import ApprovalRequest
from sessions.models import Turn
from sessions.services import session_create, workspace_path
from tests.security.conftest import run_turn, terminal, tool_results
from tests.security.test_policy_findings import check, ctx_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def bob_ws(people):
    ws = workspace_path(session_create(user=people["bob"]))
    (ws / "secret.txt").write_text("bob's secret")
    return ws


def test_the_tester_spellings_are_never_allowed(alice_session, people, layout, bob_ws):
    session, ws = alice_session
    ctx = ctx_for(session, people["alice"])
    data = layout["data"]
    assert check(f"dd if={data}/secret_key", ctx) == "deny"
    assert check(f"python3 -c \"print(open('{data}/secret_key').read())\"", ctx) == "deny"
    for command in (f"dd if={bob_ws}/secret.txt", f"git -C {bob_ws} status",
                    "find / -name secret.txt -exec cat {} +",
                    f"find {data.parent} -name secret.txt -execdir cat {{}} ;",
                    f"python3 -c \"print(open('{bob_ws}/secret.txt').read())\"",
                    f"env X={bob_ws}/secret.txt sh -c 'cat $X'",
                    f"tar -cf - -C {bob_ws} .", f"grep -r secret {data.parent}"):
        assert check(command, ctx) == "ask", command
    assert check(f"cp --target-directory={bob_ws} notes.txt", ctx) == "deny"
    assert check(f"{{ echo x; }} > {bob_ws}/planted.txt", ctx) == "deny"
    assert check("find / -name secret.txt", ctx) == "allow"  # lists names only (decided)


def test_dd_of_the_secret_key_is_denied_in_a_real_turn_and_nothing_is_copied(
        alice_session, people, model, layout):
    session, ws = alice_session
    model.plan = [terminal(f"dd if={layout['data']}/secret_key of=stolen.txt")]
    turn = run_turn(session, people["alice"])
    assert turn.status == Turn.Status.COMPLETED
    (result,) = tool_results(session)
    assert result.is_error and result.content.startswith("not executed:")
    assert "secret_key" in result.content and "s3cret" not in result.content
    assert not (ws / "stolen.txt").exists()


@pytest.mark.parametrize("command", [
    "python3 -c \"open('stolen.txt', 'w').write(open('{bob}/secret.txt').read())\"",
    "git -C {bob} show HEAD:secret.txt > stolen.txt ; cp {bob}/secret.txt stolen.txt",
    "find {root} -name secret.txt -exec cp {{}} stolen.txt ;",
    "X={bob}/secret.txt sh -c 'cp \"$X\" stolen.txt'",
])
def test_reading_another_workspace_asks_in_a_real_turn_and_runs_nothing(
        alice_session, people, model, layout, bob_ws, command):
    session, ws = alice_session
    model.plan = [terminal(command.format(bob=bob_ws, root=layout["data"].parent))]
    turn = run_turn(session, people["alice"])
    assert turn.status == Turn.Status.AWAITING_APPROVAL
    approval = ApprovalRequest.objects.get(session=session)
    assert approval.risk_class == "host_read"
    assert tool_results(session) == [] and not (ws / "stolen.txt").exists()
