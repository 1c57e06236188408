"""The workspace panel (sessions/files.py through Workspace) and the context gauge selector,
through the Django test client on real rows; the gauge after a real turn on the simulator."""

from __future__ import annotations

import os

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from agents.context.compaction import compaction_threshold
from sessions.events import event_append
from sessions.gauge import session_context_gauge
from sessions.models import Message, RunEvent, Session
from sessions.services import session_create, turn_start, workspace_path
from sessions.tasks import turn_run_task

pytestmark = pytest.mark.django_db(transaction=True)
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def alice(make_user, hermes_settings):
    hermes_settings.HERMES = {**hermes_settings.HERMES, "BACKEND": "local",
                              "UPLOAD_MAX_BYTES": 1000}
    return make_user("alice", team="red")


@pytest.fixture
def client_for(client):
    def do(user):
        client.force_login(user, backend="django.contrib.auth.backends.ModelBackend")
        return client
    return do


def test_tree_lists_files_and_links_without_following(alice, client_for, tmp_path):
    session = session_create(user=alice)
    ws = workspace_path(session)
    (ws / "src").mkdir()
    (ws / "src" / "app.py").write_text("def hello():\n    return 1\n")
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET")
    os.symlink(secret, ws / "leak.txt")
    (ws / ".hermes").mkdir()
    client = client_for(alice)
    page = client.get(reverse("session_files", args=[session.pk])).content.decode()
    assert "README.md" in page and "app.py" in page and "src/" in page
    assert "leak.txt" in page and "link, not followed" in page and ".hermes" not in page
    preview = client.get(reverse("session_files", args=[session.pk]),
                         {"path": "src/app.py"}).content.decode()
    assert '<span class="k">def</span>' in preview  # Pygments, sessions/highlight.py
    leak = client.get(reverse("session_files", args=[session.pk]), {"path": "leak.txt"})
    assert "TOP SECRET" not in leak.content.decode()
    assert "symbolic link" in leak.content.decode()
    download = client.get(reverse("file_download", args=[session.pk]), {"path": "leak.txt"})
    assert download.status_code == 404 and b"TOP SECRET" not in download.content
    outside = client.get(reverse("file_download", args=[session.pk]), {"path": "../../etc/passwd"})
    assert outside.status_code == 404 and b"outside" in outside.content
    ok = client.get(reverse("file_download", args=[session.pk]), {"path": "src/app.py"})
    assert ok.status_code == 200 and ok.content.startswith(b"def hello")
    assert 'attachment; filename="app.py"' == ok["Content-Disposition"]


def test_download_through_a_link_or_a_file_says_which_in_one_sentence(alice, client_for,
                                                                        tmp_path):
    """A user's finding: a download through a linked directory answered "… is or goes
    through a symbolic link; tools do not follow links, which may point outside the session
    workspace, or is not a directory" (two cases glued into one garbled sentence)."""
    session = session_create(user=alice)
    ws = workspace_path(session)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "README.md").write_text("TOP SECRET")
    os.symlink(outside, ws / "docs")
    client = client_for(alice)
    url = reverse("file_download", args=[session.pk])
    link = client.get(url, {"path": "docs/README.md"})
    text = link.content.decode()
    assert link.status_code == 404 and "TOP SECRET" not in text
    assert text == ("path 'docs/README.md' goes through a symbolic link ('docs'); tools do "
                    "not follow links, which may point outside the session workspace."), text
    plain = client.get(url, {"path": "README.md/inner.txt"}).content.decode()
    assert plain == "path 'README.md/inner.txt': 'README.md' is a file, not a directory.", plain


def test_upload_saved_under_another_name_says_so(alice, client_for):
    """A user's finding: "../../escape.txt" was saved as "escape.txt" without a word. The
    form sends the browser's name for the file (static/app.js fills "name"); a name the
    server trims itself is reported without it."""
    session = session_create(user=alice)
    client = client_for(alice)
    url = reverse("file_upload", args=[session.pk])
    moved = client.post(url, {"file": SimpleUploadedFile("escape.txt", b"x"),
                              "name": "../../escape.txt"}, **HTMX).content.decode()
    assert ("“../../escape.txt” was saved as escape.txt: uploads go to the workspace root "
            "under the file's own name.") in moved
    assert (workspace_path(session) / "escape.txt").read_bytes() == b"x"
    trimmed = client.post(url, {"file": SimpleUploadedFile(" spaced.txt ", b"y")},
                          **HTMX).content.decode()
    assert "“ spaced.txt ” was saved as spaced.txt" in trimmed
    same = client.post(url, {"file": SimpleUploadedFile("same.txt", b"z"),
                             "name": "same.txt"}, **HTMX).content.decode()
    assert "Uploaded same.txt." in same and "was saved as" not in same


def test_upload_writes_through_the_workspace_and_refuses_past_the_cap(alice, client_for):
    session = session_create(user=alice)
    client = client_for(alice)
    url = reverse("file_upload", args=[session.pk])
    ok = client.post(url, {"file": SimpleUploadedFile("notes.txt", b"hello")}, **HTMX)
    assert ok.status_code == 200 and "Uploaded notes.txt" in ok.content.decode()
    assert (workspace_path(session) / "notes.txt").read_bytes() == b"hello"
    assert RunEvent.objects.filter(session=session, type="workspace.changed").count() == 1
    big = client.post(url, {"file": SimpleUploadedFile("big.bin", b"x" * 1001)}, **HTMX)
    assert big.status_code == 400
    assert "over the upload limit of 1,000 bytes" in big.content.decode()
    assert not (workspace_path(session) / "big.bin").exists()
    hidden = client.post(url, {"file": SimpleUploadedFile(".env", b"A=1")}, **HTMX)
    assert hidden.status_code == 400 and "starting with a dot" in hidden.content.decode()
    sneaky = client.post(url, {"file": SimpleUploadedFile("../../x.txt", b"A")}, **HTMX)
    assert sneaky.status_code == 200 and (workspace_path(session) / "x.txt").exists()
    none = client.post(url, {}, **HTMX)
    assert none.status_code == 400 and "Choose a file" in none.content.decode()


def test_the_upload_label_and_refusal_name_the_cap_with_the_same_number(alice, client_for,
                                                                       hermes_settings):
    hermes_settings.HERMES = {**hermes_settings.HERMES, "UPLOAD_MAX_BYTES": 2_000_000}
    session = session_create(user=alice)
    client = client_for(alice)
    panel = client.get(reverse("session_files", args=[session.pk]), **HTMX).content.decode()
    assert "Upload a file (up to 2 MB (2,000,000 bytes))" in panel
    big = client.post(reverse("file_upload", args=[session.pk]),
                      {"file": SimpleUploadedFile("big.bin", b"x" * 2_000_001)}, **HTMX)
    assert big.status_code == 400
    assert ("“big.bin” is 2,000,001 bytes, over the upload limit of 2 MB (2,000,000 bytes)."
            in big.content.decode())


def test_team_admin_reads_files_but_cannot_upload(alice, make_user, client_for):
    session = session_create(user=alice)
    carol = make_user("carol", team="red", role="admin")
    client = client_for(carol)
    assert client.get(reverse("session_files", args=[session.pk])).status_code == 200
    response = client.post(reverse("file_upload", args=[session.pk]),
                           {"file": SimpleUploadedFile("x.txt", b"x")})
    assert response.status_code == 404


def test_gauge_after_a_real_turn_is_calibrated_and_grows_with_history(alice, client_for):
    session = session_create(user=alice)
    empty = session_context_gauge(session=session)
    assert empty.history == 0 and empty.floor > 500  # tool schemas alone
    turn_start(session=session, user=alice, text="list the files and read README.md")
    turn_run_task.apply(args=[session.pk])
    session = Session.objects.get(pk=session.pk)
    gauge = session_context_gauge(session=session)
    assert gauge.history > 0 and gauge.floor > empty.floor  # the system prompt now exists
    assert gauge.threshold == compaction_threshold(200_000) == 150_000
    assert gauge.calibrated  # the simulator billed the last request
    anchor = session.usage_anchor["anchor"]
    assert gauge.projected >= anchor["billed"]
    page = client_for(alice).get(reverse("session_detail", args=[session.pk])).content.decode()
    assert f"{gauge.percent}% context" in page and 'id="compact-now"' in page
    partial = client_for(alice).get(reverse("session_gauge", args=[session.pk]))
    assert partial.status_code == 200 and b'id="gauge"' in partial.content


def test_raw_message_is_the_text_as_written(alice, client_for):
    session = session_create(user=alice)
    row = Message.objects.create(session=session, role="assistant", content="# Title\n*x*")
    client = client_for(alice)
    response = client.get(reverse("message_raw", args=[session.pk]), {"message": row.pk})
    assert response.content.decode() == "# Title\n*x*"
    Message.objects.filter(pk=row.pk).update(active=False)
    assert client.get(reverse("message_raw", args=[session.pk]),
                      {"message": row.pk}).status_code == 404
    assert client.get(reverse("message_raw", args=[session.pk]),
                      {"message": "²"}).status_code == 404


def test_gauge_lists_compactions_and_prunes_as_events(alice, client_for):
    session = session_create(user=alice)
    event_append(session_id=session.pk, type="compaction",
                 payload={"tokens_before": 120000, "tokens_after": 9000, "kind": "summary"})
    event_append(session_id=session.pk, type="prune", payload={})
    page = client_for(alice).get(reverse("session_gauge", args=[session.pk])).content.decode()
    assert "Context reductions" in page
    assert "120000 → 9000 tokens" in page and "Old tool output was pruned" in page
