"""The policy against corpora of real command lines and against generated obfuscations.

tests/agents/corpus/: hardline.txt (every line must be denied), dangerous.txt (every line
must ask or deny), everyday.txt (ordinary development commands; the share that asks is the
false-ask rate). One command per line; ``<NL>`` stands for a newline."""

from __future__ import annotations

import atexit
import base64
import shlex
import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.policy import PolicyContext, check_command

CORPUS = Path(__file__).parent / "corpus"
FALSE_ASK_THRESHOLD = 0.03  # at most 3% of everyday commands may ask (issue 8)


def lines(name: str) -> list[str]:
    text = (CORPUS / name).read_text()
    return [line.replace("<NL>", "\n") for line in text.splitlines() if line.strip()]


HARDLINE = lines("hardline.txt")
OBFUSCATION = lines("obfuscation.txt")
DANGEROUS = lines("dangerous.txt") + OBFUSCATION
EVERYDAY = lines("everyday.txt")

# A deployment laid out as on a real host: the app's code, its data directory (database,
# secret key, every user's workspace) and this session's workspace, #7, holding the files
# the corpora name (benign project files, and scripts an attacker wrote with write_file).
LAYOUT = Path(tempfile.mkdtemp(prefix="hermes-corpus-"))
atexit.register(shutil.rmtree, LAYOUT, True)
CODE = LAYOUT / "hermes"
DATA = CODE / "var"
WS = DATA / "workspaces" / "7"
FILES = {
    CODE / "manage.py": "import sys\n",
    CODE / "hermes_web" / "settings.py": "DEBUG = False\n",
    DATA / "hermes.sqlite3": "", DATA / "secret_key": "k",
    DATA / "workspaces" / "3" / "notes.txt": "another user's notes",
    WS / "x.py": "print('hello')\n",
    WS / "app.py": "import argparse\nimport http.server\nprint(open('data.csv').read())\n",
    WS / "server.js": "const http = require('http');\nhttp.createServer().listen(8000);\n",
    WS / "manage.py": "import os\nimport sys\nfrom django.core.management import "
                      "execute_from_command_line\nos.environ.setdefault('X', 'y')\n"
                      "execute_from_command_line(sys.argv)\n",
    WS / "setup.py": "from setuptools import setup\nsetup(name='x')\n",
    WS / "run.sh": "#!/bin/sh\nset -e\npython3 app.py --port 8000\n",
    WS / "scripts" / "build.sh": "#!/bin/bash\nmkdir -p build\ncp -r src build/\n",
    WS / "configure": "#!/bin/sh\necho checking for cc... yes\n",
    WS / "tools" / "gen.py": "import json\nwith open('out.json', 'w') as f:\n"
                             "    json.dump({}, f)\n",
    WS / "evil.sh": "echo cleaning\nrm -rf /\n",
    WS / "evil.py": "import shutil\nshutil.rmtree('/home')\n",
    WS / "evil.pl": "system('rm -rf /');\n",
    WS / "evil.js": "require('child_process').execSync(process.argv[2]);\n",
    WS / "evil.awk": "{ system($0) }\n",
    WS / "job.sh": "rm -rf ~\n",
    WS / "cmds.txt": "rm -rf /\n", WS / "list.txt": "/etc/passwd\n",
    WS / ".env": "API_URL=http://localhost\nDEBUG=1\n",
    # a real virtualenv's activate script (sourced by everyday commands)
    WS / ".venv" / "bin" / "activate": (Path(sys.prefix) / "bin" / "activate").read_text(),
    WS / "venv" / "bin" / "activate": (Path(sys.prefix) / "bin" / "activate").read_text(),
}
for _path, _text in FILES.items():
    _path.parent.mkdir(parents=True, exist_ok=True)
    _path.write_text(_text)
(WS / "run.sh").chmod(0o755)
CTX = PolicyContext(session_id="s1", user_id="u1", workspace=str(WS),
                    private_paths=(str(CODE), str(DATA)),
                    app_config_paths=(str(CODE / "hermes_web" / "settings.py"),
                                      str(DATA / "secret_key"), str(DATA / "hermes.sqlite3")))


def test_corpus_sizes():
    assert len(OBFUSCATION) >= 200
    assert len(DANGEROUS) >= 300
    assert len(HARDLINE) >= 60
    assert len(EVERYDAY) >= 200


def test_every_hardline_command_is_denied_even_under_bypass():
    yolo = replace(CTX, bypass=True, always_rules=("*",))
    missed = [(c, d.rule) for c in HARDLINE if (d := check_command(c, yolo)).verdict != "deny"]
    print(f"\nhardline corpus: {len(HARDLINE) - len(missed)}/{len(HARDLINE)} denied")
    assert missed == []


def test_every_dangerous_command_asks_or_denies():
    verdicts = {c: check_command(c, CTX).verdict for c in DANGEROUS}
    allowed = [c for c, v in verdicts.items() if v == "allow"]
    denied = sum(v == "deny" for v in verdicts.values())
    print(f"\ndangerous corpus: {len(DANGEROUS)} commands, {len(DANGEROUS) - denied} ask, "
          f"{denied} deny, {len(allowed)} allow")
    assert allowed == []


def test_dangerous_commands_deny_when_unattended():
    unattended = replace(CTX, unattended=True)
    assert [c for c in DANGEROUS if check_command(c, unattended).verdict != "deny"] == []


def test_everyday_false_ask_rate():
    # On the local backend as it runs by default, under Landlock: the kernel holds the
    # boundary for what the policy cannot read (interpreter code, computed paths).
    confined = replace(CTX, host_confined=True)
    asked = [(c, d.rule) for c in EVERYDAY
             if (d := check_command(c, confined)).verdict != "allow"]
    rate = len(asked) / len(EVERYDAY)
    print(f"\neveryday corpus: {len(EVERYDAY)} commands, {len(asked)} ask "
          f"(false-ask rate {rate:.1%}): {asked}")
    assert all(check_command(c, confined).verdict != "deny" for c in EVERYDAY)
    assert rate <= FALSE_ASK_THRESHOLD
    # With the policy as the only guard it asks about code it cannot follow (fail closed)
    # and still denies nothing ordinary.
    alone = [c for c in EVERYDAY if check_command(c, CTX).verdict != "allow"]
    print(f"policy-only host: {len(alone)} ask ({len(alone) / len(EVERYDAY):.1%})")
    assert all(check_command(c, CTX).verdict != "deny" for c in EVERYDAY)


def _b64(cmd: str) -> str:
    return f"echo {base64.b64encode(cmd.encode()).decode()} | base64 -d | bash"


WHOLE = [
    lambda c: f"sh -c {shlex.quote(c)}", lambda c: f"bash -lc {shlex.quote(c)}",
    lambda c: f"eval {shlex.quote(c)}", _b64, lambda c: f"true && {c}", lambda c: f"( {c} )",
    lambda c: f"{{ {c}; }}", lambda c: f"if true; then {c}; fi",
    lambda c: f"su -c {shlex.quote(c)}", lambda c: f"echo {shlex.quote(c)} | sh",
    lambda c: f"bash <<'EOF'\n{c}\nEOF",
]
PREFIX = ["env FOO=1 ", "timeout 5 ", "nice -n 5 ", "nohup ", "command ", "sudo ",
          "/usr/bin/env ", "stdbuf -oL ", "exec "]


@settings(max_examples=150, deadline=None)
@given(cmd=st.sampled_from(HARDLINE), wraps=st.lists(st.sampled_from(WHOLE), max_size=2))
def test_property_wrapping_a_hardline_command_keeps_it_denied(cmd, wraps):
    for wrap in wraps:
        cmd = wrap(cmd)
    d = check_command(cmd, replace(CTX, bypass=True))
    # bash itself rejects some nestings (a heredoc end marker followed by ")"); those do
    # not parse and then ask even under bypass
    assert d.verdict == "deny" or (d.verdict, d.rule) == ("ask", "unparseable"), cmd


@settings(max_examples=200, deadline=None)
@given(cmd=st.sampled_from(HARDLINE + DANGEROUS), prefix=st.sampled_from(PREFIX),
       wraps=st.lists(st.sampled_from(WHOLE), max_size=2), cut=st.integers(1, 3))
def test_property_no_wrapping_or_quoting_makes_a_risky_command_allowed(cmd, prefix, wraps, cut):
    first = cmd.split(" ", 1)[0]
    if first.isalpha() and len(first) > cut:  # r""m, r\m: quotes inside the name
        cmd = f'{first[:cut]}""{first[cut:]}' + cmd[len(first):]
    cmd = prefix + cmd
    for wrap in wraps:
        cmd = wrap(cmd)
    assert check_command(cmd, CTX).verdict != "allow", cmd


@pytest.mark.parametrize("cmd", EVERYDAY[:40])
def test_everyday_commands_stay_allowed_inside_plain_wrappers(cmd):
    before = check_command(cmd, CTX).verdict
    assert check_command(f"timeout 60 {cmd}" if "\n" not in cmd and not cmd.startswith(
        ("(", "for", "if", "cd", "export", "time")) else cmd, CTX).verdict == before
