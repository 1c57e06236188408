"""Paths the kernel refuses (a name over 255 bytes, a file used as a directory, a NUL, a
loop of links) in every workspace-panel endpoint, through the Django test client: a clear
400/404 with the reason, never a 500, and nothing outside the workspace read or written.

A tester's finding: /sessions/<id>/files/?path=<300×a> and …/files/download/?path=<300×a>
answered 500 (OSError: [Errno 36] File name too long)."""

from __future__ import annotations

import os

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from sessions.services import session_create, workspace_path

pytestmark = pytest.mark.django_db(transaction=True)
HTMX = {"HTTP_HX_REQUEST": "true"}
LONG = "a" * 300


@pytest.fixture
def alice(make_user, hermes_settings):
    hermes_settings.HERMES = {**hermes_settings.HERMES, "BACKEND": "local"}
    return make_user("alice")


@pytest.fixture
def session(alice, tmp_path):
    session = session_create(user=alice)
    ws = workspace_path(session)
    (ws / "notes.txt").write_text("hello")
    (ws / "sub").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP SECRET")
    os.symlink(outside, ws / "leak")
    os.symlink("loop", ws / "loop")  # a link to itself: ELOOP when followed
    return session


BAD = {
    "a long name": (LONG, "too long"),
    "a long name in a directory": (f"sub/{LONG}", "too long"),
    "a long directory name": (f"{LONG}/x.txt", "too long"),
    "a long name through a link": (f"leak/{LONG}", "symbolic link"),
    "a long absolute path": ("/" + "/".join([LONG] * 20), "outside"),
    "a file used as a directory": ("notes.txt/x", "is a file, not a directory"),
    "a link loop": ("loop/x", "symbolic link"),
    "a NUL": ("notes.txt\x00.png", "NUL"),
}


@pytest.mark.parametrize("case", BAD)
def test_list_and_download_refuse_with_the_reason(alice, login, session, case):
    path, says = BAD[case]
    client = login(alice)
    panel = client.get(reverse("session_files", args=[session.pk]), {"path": path}, **HTMX)
    text = panel.content.decode()
    assert panel.status_code == 400, text[:300]
    assert says in text and 'id="files-error"' in text and "notes.txt" in text  # the tree
    assert "TOP SECRET" not in text and "Traceback" not in text and "Errno" not in text
    download = client.get(reverse("file_download", args=[session.pk]), {"path": path})
    assert download.status_code == 404
    body = download.content.decode()
    assert says in body and "TOP SECRET" not in body and "Errno" not in body


def test_a_long_name_is_shown_shortened_in_the_reason(alice, login, session):
    body = login(alice).get(reverse("file_download", args=[session.pk]),
                            {"path": LONG}).content.decode()
    assert LONG not in body and "300 characters" in body and "255 bytes" in body


def test_upload_of_a_name_too_long_is_refused_and_writes_nothing(alice, login, session):
    """Django cuts an upload's name to 255 characters; 200 "é" are still 400 bytes, past
    the file system's 255-byte name limit."""
    ws = workspace_path(session)
    before = sorted(os.listdir(ws))
    response = login(alice).post(reverse("file_upload", args=[session.pk]),
                                 {"file": SimpleUploadedFile("é" * 200 + ".txt", b"x")},
                                 **HTMX)
    text = response.content.decode()
    assert response.status_code == 400 and "too long" in text and "255 bytes" in text
    assert "Errno" not in text
    assert sorted(os.listdir(ws)) == before  # no temp file left behind either


def test_a_good_path_still_previews_and_downloads(alice, login, session):
    client = login(alice)
    panel = client.get(reverse("session_files", args=[session.pk]), {"path": "notes.txt"})
    assert panel.status_code == 200 and "hello" in panel.content.decode()
    assert client.get(reverse("file_download", args=[session.pk]),
                      {"path": "notes.txt"}).content == b"hello"
