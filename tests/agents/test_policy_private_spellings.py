"""Issue 8 finding 2 "by any spelling": on a host backend a command that names one of the
app's private paths (its data directory with the database and secret key, its code, other
users' workspaces) anywhere never gets "allow": reads ask (the app's own config and
secrets are denied), writes are denied. Generated spellings: operand forms (``key=PATH``,
``--opt=PATH``, option arguments such as ``git -C``), code strings of interpreters, shell
payloads, assignments, heredocs, file lists, quoting and path forms (``..``, ``~``,
``/proc/self/root``, ``$'\\x2f'``, globs, braces), wrappers; and recursive programs rooted at an ancestor
of a private path. The false-positive side: the same forms on the session's own
workspace, /usr and system files stay allowed.

The layout is a real one on disk (agents/policy/paths.py resolves with realpath).
"""

from __future__ import annotations

import atexit
import shlex
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from agents.policy import PolicyContext, check_command

ROOT = Path(tempfile.mkdtemp(prefix="hermes-private-"))
atexit.register(shutil.rmtree, ROOT, True)
CODE = ROOT / "app"
DATA = ROOT / "data"
WS_ROOT = DATA / "workspaces"
WS = WS_ROOT / "7"
OTHER = WS_ROOT / "3"
for path, text in {CODE / "manage.py": "import sys\n", CODE / "settings.py": "X = 1\n",
                   DATA / "secret_key": "k", DATA / "hermes.sqlite3": "",
                   OTHER / "notes.txt": "bob's notes", OTHER / ".git" / "HEAD": "ref\n",
                   WS / "x.py": "print(1)\n", WS / "sub" / "a.txt": "a\n",
                   WS / "list.txt": f"{OTHER}/notes.txt\n",
                   WS / "own.txt": f"{WS}/x.py\n"}.items():
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
CTX = PolicyContext(session_id="s1", user_id="u1", workspace=str(WS),
                    private_paths=(str(CODE), str(DATA), str(WS_ROOT)),
                    app_config_paths=(str(CODE / "settings.py"), str(DATA / "secret_key"),
                                      str(DATA / "hermes.sqlite3")))

# A private file and a private directory, and ways of spelling each (from the workspace).
READ_FILES = [OTHER / "notes.txt", CODE / "manage.py", DATA / "secret_key"]


def spellings(target: Path) -> list[str]:
    """Shell words naming ``target`` (the workspace is the working directory and HOME)."""
    rel = Path("..") / target.relative_to(WS_ROOT) if target.is_relative_to(WS_ROOT) \
        else Path("../..") / target.relative_to(DATA) if target.is_relative_to(DATA) \
        else None
    absolute = str(target)
    out = [absolute, f"{target.parent}/../{target.parent.name}/{target.name}",
           f"/proc/self/root{absolute}", absolute.replace("/", "//", 1),
           "$'\\x2f'" + absolute[1:], f"'{absolute}'", f'"{absolute}"',
           absolute[:-1] + "?", f"{target.parent}/[{target.name[0]}]{target.name[1:]}",
           f"{target.parent}/{{{target.name},nothing}}",
           f"{ROOT.parent}/{ROOT.name[:-2]}*/{target.relative_to(ROOT)}"]
    if rel is not None:
        out += [str(rel), f"~/{rel}", f"$HOME/{rel}", f"./{rel}", f"sub/../{rel}"]
    return out


def as_code_string(word: str) -> str:
    """A path spelling inside a code string: only the forms a program sees literally."""
    return word.strip("'\"") if not word.startswith("$") else word


READERS = [
    "cat {p}", "dd if={p}", "head -c 10 {p}", "cp {p} copy.txt", "tar -cf - {p}",
    "base64 {p}", "cat < {p}", "grep -r . {p}", "rsync -a {p} out/",
    "sh -c {sq}", "bash -c {dq_cmd}", "env X={p} sh -c 'cat \"$X\"'",
    "X={p} bash -c 'cat $X'", "while read l; do echo \"$l\"; done < {p}",
    "{{ cat; }} < {p}", "awk '{{print}}' {p}", "sqlite3 {p} .dump",
    "less --log-file=copy.txt {p}", "curl file://{pc}", "diff x.py {p}",
]
CODE_READERS = [
    "python3 -c \"print(open('{c}').read())\"",
    "python3 -c \"import os; print(open(os.path.join('{c_dir}', '{c_name}')).read())\"",
    "python3 -c \"print(open('{c_dir}' + '/{c_name}').read())\"",
    "perl -e 'open(F, \"{c}\"); print <F>'",
    "ruby -e 'puts File.read(\"{c}\")'",
    "node -e \"console.log(require('fs').readFileSync('{c}', 'utf8'))\"",
    "php -r 'echo file_get_contents(\"{c}\");'",
    "awk 'BEGIN {{ while ((getline l < \"{c}\") > 0) print l }}'",
    "python3 <<'EOF'\nprint(open('{c}').read())\nEOF",
    "python3 - <<EOF\nprint(open('{c}').read())\nEOF",
]
DIR_READERS = [
    "git -C {d} status", "git --git-dir={d}/.git log", "git --work-tree={d} diff",
    "make -C {d}", "tar -cf - -C {d} .", "tar -C {d} -cf - .", "ls -R {d}",
    "find {d} -name '*.txt'", "grep -rn secret {d}", "rg secret {d}", "du -a {d}",
]
ANCESTOR_READERS = [
    "find {a} -name notes.txt -exec cat {{}} +", "find {a} -name notes.txt -execdir cat {{}} ;",
    "find {a} -type f -ok cat {{}} ;", "grep -r secret {a}", "grep -R secret {a}",
    "rg secret {a}", "tar -cf - {a}", "cp -r {a} copy", "zip -r out.zip {a}",
    "rsync -a {a} copy/",
]
WRITERS = [
    "echo x > {p}", "echo x >> {p}", "cp x.py {p}", "mv x.py {p}", "tee {p} < x.py",
    "dd if=x.py of={p}", "touch {p}", "truncate -s 0 {p}", "ln -sf x.py {p}",
    "curl -o {p} http://example.com", "curl --output={p} http://example.com",
    "sort -o {p} x.py", "{{ echo x; }} > {p}", "sh -c {sq_write}",
    "python3 -c \"open('{c}', 'w').write('x')\"", "rm -f {p}",
]
DIR_WRITERS = [
    "cp --target-directory={d} x.py", "cp -t {d} x.py", "mv -t {d} x.py",
    "install -t {d} x.py", "rsync -a x.py {d}/", "tar -xf a.tar -C {d}",
    "tar --extract --file=a.tar --directory={d}", "unzip a.zip -d {d}",
    "wget --directory-prefix={d} http://example.com", "find {d} -delete",
    "chmod -R 777 {d}", "rm -rf {d}", "find {d} -name x -exec rm {{}} +",
]
ANCESTOR_WRITERS = ["find {a} -name '*.txt' -delete", "chmod -R 777 {a}",
                    "chown -R nobody {a}", "find {a} -exec rm -f {{}} +"]
WRAPS = [
    lambda c: c, lambda c: f"timeout 5 {c}", lambda c: f"env A=1 {c}", lambda c: f"nice {c}",
    lambda c: f"sh -c {shlex.quote(c)}", lambda c: f"eval {shlex.quote(c)}",
    lambda c: f"true && {c}", lambda c: f"( {c} )", lambda c: f"cd sub && cd .. && {c}",
    lambda c: f"if true; then {c}; fi", lambda c: f"bash <<'EOF'\n{c}\nEOF",
]


PREFIX_WRAPS = WRAPS[1:4]


def valid(template: str, wrap) -> bool:
    """bash itself rejects a prefix command before a group (``timeout 5 { ...; }``)."""
    return not (wrap in PREFIX_WRAPS and template.startswith(("{", "while")))


def fill(template: str, word: str, target: Path) -> str:
    code = as_code_string(word) if not word.startswith("$") else str(target)
    return template.format(
        p=word, pc=str(target), sq=shlex.quote(f"cat {word}"),
        dq_cmd='"cat ' + word.replace('"', '\\"') + '"',
        sq_write=shlex.quote(f"echo x > {word}"), c=code,
        c_dir=str(target.parent), c_name=target.name, d=word, a=word)


def verdict(command: str) -> str:
    return check_command(command, CTX).verdict


@settings(max_examples=400, deadline=None)
@given(target=st.sampled_from(READ_FILES), data=st.data(),
       template=st.sampled_from(READERS + CODE_READERS), wrap=st.sampled_from(WRAPS))
def test_property_reading_a_private_file_by_any_spelling_is_never_allowed(
        target, data, template, wrap):
    assume(valid(template, wrap))
    word = data.draw(st.sampled_from(spellings(target)))
    command = wrap(fill(template, word, target))
    assert verdict(command) != "allow", command


@settings(max_examples=300, deadline=None)
@given(target=st.sampled_from([OTHER, CODE, DATA]), data=st.data(),
       template=st.sampled_from(DIR_READERS), wrap=st.sampled_from(WRAPS))
def test_property_option_arguments_naming_a_private_directory_are_never_allowed(
        target, data, template, wrap):
    word = data.draw(st.sampled_from([w for w in spellings(target) if "$'" not in w]))
    command = wrap(fill(template, word, target))
    assert verdict(command) != "allow", command


@settings(max_examples=300, deadline=None)
@given(target=st.sampled_from([OTHER / "notes.txt", OTHER / "new.txt", CODE / "new.py"]),
       data=st.data(), template=st.sampled_from(WRITERS), wrap=st.sampled_from(WRAPS))
def test_property_writing_a_private_file_by_any_spelling_is_denied(
        target, data, template, wrap):
    assume(valid(template, wrap))
    word = data.draw(st.sampled_from(spellings(target)))
    command = wrap(fill(template, word, target))
    # a write spelled inside code the policy reads as code (python -c open(..., 'w'))
    # is a write; one it can only see as a mention asks: never allowed either way
    expected = {"deny"} if "python3" not in template else {"deny", "ask"}
    assert verdict(command) in expected, command


@settings(max_examples=200, deadline=None)
@given(target=st.sampled_from([OTHER, CODE]), data=st.data(),
       template=st.sampled_from(DIR_WRITERS), wrap=st.sampled_from(WRAPS))
def test_property_writing_into_a_private_directory_by_any_option_form_is_denied(
        target, data, template, wrap):
    word = data.draw(st.sampled_from([w for w in spellings(target) if "$'" not in w]))
    command = wrap(fill(template, word, target))
    assert verdict(command) == "deny", command


@pytest.mark.parametrize("ancestor", ["/", str(ROOT), str(ROOT) + "/"])
@pytest.mark.parametrize("template", ANCESTOR_READERS)
def test_recursive_reads_rooted_above_a_private_path_ask(ancestor, template):
    command = template.format(a=ancestor)
    d = check_command(command, CTX)
    assert d.verdict == "ask" and d.risk_class == "host_read", (command, d)
    assert str(DATA) in d.reason or str(CODE) in d.reason  # the card names what it reaches


@pytest.mark.parametrize("ancestor", ["/", str(ROOT)])
@pytest.mark.parametrize("template", ANCESTOR_WRITERS)
def test_recursive_writes_rooted_above_a_private_path_are_denied(ancestor, template):
    command = template.format(a=ancestor)
    assert verdict(command) == "deny", command


@pytest.mark.parametrize("command", [
    "xargs cat < list.txt", "cat list.txt | xargs cat", "xargs -a list.txt cat",
    "while read f; do cat \"$f\"; done < list.txt", "cat $(cat list.txt)",
    "cat \"$(< list.txt)\"", "cat `cat list.txt`",
])
def test_paths_read_from_a_workspace_file_list_are_judged(command):
    assert verdict(command) == "ask", command


# --- false positives: the same forms on ordinary paths stay allowed ---------------------

@pytest.mark.parametrize("command", [
    "dd if=x.py of=/dev/null bs=1k", "dd if=/dev/zero bs=1 count=4",
    "git -C sub status", f"git -C {WS}/sub log", "git --git-dir=.git log", "make -C sub",
    "tar -cf - -C /usr/share/doc .", "tar -xf a.tar -C sub", "cp --target-directory=sub x.py",
    "cp -t /tmp x.py", "find . -name '*.py' -exec grep -l foo {} +", "grep -rn TODO .",
    "rg TODO", "find / -name libc.so.6", "find /usr -name '*.h' -exec grep -l foo {} +",
    "grep -r include /usr/include", "python3 -c \"print(open('/etc/hostname').read())\"",
    f"python3 -c \"print(open('{WS}/x.py').read())\"", "python3 -c 'import os; print(1)'",
    "perl -e 'print \"/usr/bin\\n\"'", "awk -F: '{print $1}' /etc/passwd",
    "env PATH=/usr/bin:/bin ls", "PYTHONPATH=src python3 x.py", "xargs cat < own.txt",
    "cat own.txt | xargs wc -l", "while read f; do wc -l \"$f\"; done < own.txt",
    "echo done > /tmp/status.txt", "{ echo a; echo b; } > out.txt",
    "for i in 1 2; do echo $i; done > /tmp/loop.txt", "curl -o /tmp/page.html https://e.com",
    "ls -la /tmp", "cat ~/x.py", "cat ./sub/../x.py", "rsync -a sub/ /tmp/backup/",
])
def test_ordinary_paths_in_the_same_forms_stay_allowed(command):
    # Under Landlock (the local backend's default): with the policy as the only guard, a
    # loop variable read from a file is a computed path and asks (tests/security/
    # test_unseen_paths.py); every other command here is allowed there too.
    d = check_command(command, replace(CTX, host_confined=True))
    assert d.verdict == "allow", (command, d)
    if "$" not in command:
        # With the policy as the only guard, interpreter code and awk programs that open
        # files by strings ask (agents/policy/host_reach.py opaque_reach); nothing else does.
        unconfined = check_command(command, CTX)
        assert unconfined.verdict == "allow" or unconfined.rule == "opaque_code", command


def test_the_sandbox_backend_is_not_judged_by_host_paths():
    isolated = replace(CTX, backend_isolated=True)
    assert check_command(f"git -C {OTHER} status", isolated).verdict == "allow"


@pytest.mark.parametrize("command", ["rm -rf *", "rm -rf sub/*", "find . -delete",
                                     "chmod -R 777 sub", "find sub -name '*.pyc' -delete"])
def test_recursive_writes_in_the_own_workspace_keep_their_usual_ask(command):
    d = check_command(command, CTX)
    assert d.verdict == "ask" and d.rule != "private_write", (command, d)


@pytest.mark.parametrize("command", [
    "cat $(find / -name secret_key)", "find / -name 'secret*' | xargs cat",
    f"find {ROOT} -name notes.txt | xargs cat", "find / -iname SECRET_KEY -print0 | xargs -0 cat",
])
def test_a_listing_find_that_feeds_a_reader_or_hunts_a_secret_asks(command):
    assert verdict(command) == "ask", command


@pytest.mark.parametrize("command", ["find / -name libc.so.6", "find / -name '*.conf'",
                                     "find /usr -name '*.h' | xargs grep foo",
                                     "find . -name '*.py' | xargs grep foo"])
def test_a_listing_find_elsewhere_stays_allowed(command):
    assert verdict(command) == "allow", command
