"""Issue 8 finding 7 as properties: an approved rule for a destructive command never covers
the same command with one more operand or flag; a deny rule is never evaded by an extra
flag, by reordering or respelling flags, or by an unknown wrapper in front. The real policy
on the real command (``check_command``), the rule being the approved request's normalised
form, exactly as approvals/services.py stores it."""

from __future__ import annotations

import shlex
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from agents.policy import PolicyContext, check_command
from agents.policy.paths import PROTECTED_NAMES

CTX = PolicyContext(session_id="s1", user_id="u1", workspace="/nonexistent-hermes-rules-ws")

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-.", min_size=1,
                max_size=10).filter(lambda s: not s.startswith(("-", ".")) and s != "_"
                                    # a protected file (hermes.md) is its own, stricter class
                                    and s.lower() not in PROTECTED_NAMES)
operands = st.lists(names, min_size=1, max_size=3)
DESTRUCTIVE = [
    lambda ops: f"rm -rf {' '.join(ops)}",
    lambda ops: f"rm -r {' '.join(ops)}",
    lambda ops: f"git push --force origin {' '.join(ops)}",
    lambda ops: f"git branch -D {' '.join(ops)}",
    lambda ops: f"shred {' '.join(ops)}",
    lambda ops: f"find {' '.join(ops)} -delete",
]
EXTRA_FLAGS = ["-v", "--no-preserve-root", "-i", "--verbose", "-x", "--one-file-system"]


def approved_rule(command: str) -> str:
    """What an approval of ``command`` stores as its rule pattern."""
    decision = check_command(command, CTX)
    assert decision.verdict == "ask", (command, decision)
    assert decision.risk_class in ("destructive", "git_history"), decision
    return decision.normalized


@settings(max_examples=150, deadline=None)
@given(make=st.sampled_from(DESTRUCTIVE), ops=operands, extra=names,
       scope=st.sampled_from(["always_rules", "session_rules"]))
def test_a_destructive_rule_never_covers_an_extra_operand(make, ops, extra, scope):
    command = make(ops)
    rule = approved_rule(command)
    ruled = replace(CTX, **{scope: (rule,)})
    assert check_command(command, ruled).verdict == "allow"
    widened = make([*ops, extra])
    assert check_command(widened, ruled).verdict != "allow", (rule, widened)


@settings(max_examples=150, deadline=None)
@given(make=st.sampled_from(DESTRUCTIVE), ops=operands, flag=st.sampled_from(EXTRA_FLAGS),
       at=st.integers(min_value=1, max_value=3))
def test_a_destructive_rule_never_covers_an_extra_flag(make, ops, flag, at):
    command = make(ops)
    rule = approved_rule(command)
    words = shlex.split(command)
    words.insert(min(at, len(words)), flag)
    widened = shlex.join(words)
    assert check_command(widened, replace(CTX, always_rules=(rule,))).verdict != "allow", (
        rule, widened)


@settings(max_examples=150, deadline=None)
@given(ops=operands, extra=st.lists(st.sampled_from(["-v", "-f", "-d", "-i"]), max_size=2),
       spelling=st.sampled_from(["-rf", "-fr", "-r -f", "--recursive --force", "-Rf"]),
       wrapper=st.sampled_from(["", "mywrapper ", "strace -f ", "env FOO=1 ", "sudo ",
                                "timeout 5 ", "/usr/bin/env "]))
def test_a_deny_rule_is_not_evaded_by_flags_spelling_or_wrappers(ops, extra, spelling,
                                                                 wrapper):
    deny = replace(CTX, deny_rules=(f"rm -rf {ops[0]}",))
    flags = " ".join([spelling, *extra])
    command = f"{wrapper}rm {flags} {' '.join(ops)}"
    assert check_command(command, deny).verdict == "deny", command


@settings(max_examples=100, deadline=None)
@given(ops=operands)
def test_a_rule_for_one_command_does_not_cover_it_in_another_directory(ops):
    command = f"rm -rf {' '.join(ops)}"
    ruled = replace(CTX, always_rules=(approved_rule(command),))
    assert check_command(f"cd /etc && {command}", ruled).verdict != "allow"
