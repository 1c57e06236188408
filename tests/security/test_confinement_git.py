"""Issue 8 finding 5 (high): workspaces lived under the app checkout, so the agent's
``git reset --hard`` moved the application's own HEAD. Now the default data dir (and so the
workspaces) lies outside the checkout, and every command on both backends gets
GIT_CEILING_DIRECTORIES=<workspace parent>: even a workspace placed inside a repository
cannot reach it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from agents.tools import ToolContext
from agents.tools.terminal import Terminal
from sessions import toolbox
from sessions.services import session_create, workspace_path
from tests.security.confinement_support import backend_kind, host  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def test_git_in_a_workspace_inside_a_repository_cannot_touch_that_repository(
        make_user, backend_kind, host):  # noqa: F811
    # The old layout: the checkout holds var/workspaces. Make it a repository with history
    # and a dirty file, as the app's own checkout would be.
    app = host.data.parent
    git(app, "init", "-q")
    (app / "code.py").write_text("v1\n")
    git(app, "add", "code.py")
    git(app, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "one")
    (app / "code.py").write_text("v2\n")
    git(app, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qam", "two")
    (app / "code.py").write_text("uncommitted work\n")
    head = git(app, "rev-parse", "HEAD")
    user = make_user("mallory")
    ws = workspace_path(session_create(user=user)).resolve()
    ctx = ToolContext(workspace=ws, backend=toolbox.backend_for(ws))
    out = Terminal().run({"command": "git status; git reset --hard HEAD~1; git log -1; "
                                     "git -C .. status; git clean -fdx"}, ctx).text
    assert "not a git repository" in out
    assert git(app, "rev-parse", "HEAD") == head
    assert (app / "code.py").read_text() == "uncommitted work\n"
    # The workspace may still be its own repository.
    own = Terminal().run({"command": "git init -q . && git status --short | head -1; "
                                     "git rev-parse --show-toplevel"}, ctx).text
    assert str(ws) in own and git(app, "rev-parse", "HEAD") == head


def test_the_default_data_dir_is_outside_the_checkout_and_any_git_tree(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("HERMES_DATA_DIR", "HERMES_WORKSPACE_ROOT", "XDG_DATA_HOME")}
    env["HOME"] = str(tmp_path / "home")
    code = ("from django.conf import settings; import django; django.setup(); "
            "print(settings.DATA_DIR); print(settings.HERMES['WORKSPACE_ROOT'])")
    lines = subprocess.run([sys.executable, "-c", code], env={**env, "DJANGO_SETTINGS_MODULE":
                           "hermes_web.settings"}, cwd=django_settings.BASE_DIR, check=True,
                           capture_output=True, text=True).stdout.split()
    data, workspaces = Path(lines[0]), Path(lines[1])
    base = Path(django_settings.BASE_DIR).resolve()
    assert data == tmp_path / "home" / ".local" / "share" / "hermes-web"
    assert base not in data.parents and base not in workspaces.parents
    assert workspaces.parent == data
    probe = subprocess.run(["git", "-C", str(data), "rev-parse", "--show-toplevel"],
                           capture_output=True, text=True)
    assert probe.returncode != 0 and "not a git repository" in probe.stderr
