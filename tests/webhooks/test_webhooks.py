"""Inbound webhooks through Django's test client with CSRF enforced: a good signature makes
an unattended turn built from the registered scaffold plus the payload (run through the real
runner and simulator); a bad signature, a stale timestamp, an oversized or non-JSON body are
4xx and store nothing but the bounded rejection log; a repeated delivery id runs nothing, nor
does a captured request re-sent under new delivery ids (F2: the replay key); the
per-webhook rate limit answers 429; the owner's pages create, rotate and delete, and nobody
else can see them."""

from __future__ import annotations

import html
import json
import re
import shlex
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.test import Client
from hypothesis import given
from hypothesis import strategies as st

from django.db import IntegrityError

from agents.webhook_signature import replay_key, sign, verify
from sessions.models import Message, Turn
from sessions.services import session_create
from sessions.tasks import turn_run_task
from webhooks.models import Webhook, WebhookDelivery
from webhooks.services import webhook_create

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def alice(make_user, hermes_settings):
    hermes_settings.HERMES = {**hermes_settings.HERMES, "RETRY_BASE_DELAY": 0.01,
                              "BACKEND": "local"}
    return make_user("alice")


@pytest.fixture
def hook(alice):
    session = session_create(user=alice)
    return webhook_create(user=alice, session=session, name="ci",
                          instructions="Triage the failed build described below.")


def post(hook, body: bytes, *, secret=None, ts=None, delivery="d-1", signature=None,
         client=None):
    ts = str(int(time.time()) if ts is None else ts)
    headers = {"HTTP_X_HERMES_TIMESTAMP": ts, "HTTP_X_HERMES_DELIVERY": delivery,
               "HTTP_X_HERMES_SIGNATURE": signature or sign(secret or hook.secret, ts, body)}
    client = client or Client(enforce_csrf_checks=True)  # the view is the one CSRF exemption
    return client.post(f"/hooks/{hook.token}/", data=body, content_type="application/json",
                       **headers)


def test_a_signed_delivery_becomes_an_unattended_turn_with_the_payload_as_the_tail(hook):
    body = json.dumps({"build": 42, "status": "failed"}).encode()
    response = post(hook, body)
    assert response.status_code == 202, response.content
    delivery = WebhookDelivery.objects.get()
    assert delivery.outcome == "accepted" and delivery.turn.origin == "webhook"
    turn_run_task.apply(args=[hook.session_id])
    delivery.turn.refresh_from_db()
    assert delivery.turn.status == Turn.Status.COMPLETED, delivery.turn.error
    message = Message.objects.get(session=hook.session, role="user")
    scaffold = message.sent_content[:message.stable_prefix_chars]
    assert scaffold.startswith('<webhook name="ci">\nTriage the failed build')
    assert message.sent_content[message.stable_prefix_chars:].endswith(body.decode())
    assert message.content == "[webhook: ci · delivery d-1]"
    # A second delivery: same scaffold bytes, different tail.
    assert post(hook, b'{"build": 43}', delivery="d-2").status_code == 202
    turn_run_task.apply(args=[hook.session_id])
    second = Message.objects.filter(session=hook.session, role="user").order_by("-id").first()
    assert second.sent_content[:second.stable_prefix_chars] == scaffold


@pytest.mark.parametrize("case, status, reason", [
    ("bad_signature", 401, "signature does not match"),
    ("wrong_secret", 401, "signature does not match"),
    ("stale", 401, "replay window"),
    ("future", 401, "replay window"),
    ("no_signature", 401, "X-Hermes-Signature"),
    ("bad_delivery_id", 400, "X-Hermes-Delivery"),
    ("not_json", 400, "not UTF-8 JSON"),
    ("not_utf8", 400, "not UTF-8 JSON"),
    ("oversized", 413, "limit is 65,536"),
])
def test_refused_deliveries_are_4xx_and_store_only_the_log(hook, case, status, reason):
    body, kwargs = b'{"ok": true}', {}
    if case == "bad_signature":
        kwargs["signature"] = "sha256=" + "0" * 64
    elif case == "wrong_secret":
        kwargs["secret"] = "whsec_not-the-secret"
    elif case == "stale":
        kwargs["ts"] = int(time.time()) - 305
    elif case == "future":
        kwargs["ts"] = int(time.time()) + 305
    elif case == "no_signature":
        kwargs["signature"] = "nope"
    elif case == "bad_delivery_id":
        kwargs["delivery"] = "has spaces"
    elif case == "not_json":
        body = b"build=42&status=failed"
    elif case == "not_utf8":
        body = b'{"x": "\xff"}'
    elif case == "oversized":
        body = json.dumps({"pad": "x" * 70_000}).encode()
    response = post(hook, body, **kwargs)
    assert response.status_code == status
    assert reason in response.json()["error"]
    assert not Turn.objects.exists() and not Message.objects.exists()
    logged = WebhookDelivery.objects.get()
    assert (logged.outcome, logged.status_code, logged.message_text, logged.turn) == (
        "rejected", status, "", None)


@pytest.mark.parametrize("signature", ["sha256=deadbeef", "sha256=" + "a" * 63,
                                       "sha256=" + "0" * 65])
def test_a_well_formed_signature_of_the_wrong_length_does_not_match(hook, signature):
    response = post(hook, b'{"ok": true}', signature=signature)
    error = response.json()["error"]
    assert response.status_code == 401
    assert error.startswith("signature does not match") and "64 hex digits" in error
    assert "missing" not in error and not Turn.objects.exists()


def test_a_signature_that_is_not_sha256_hex_is_still_malformed(hook):
    response = post(hook, b'{"ok": true}', signature="sha1=deadbeef")
    assert response.status_code == 401
    assert "missing or malformed X-Hermes-Signature" in response.json()["error"]


def _curl_as_pasted(script: str, env: dict[str, str]) -> tuple[dict[str, str], bytes, str]:
    """Run a shell example as pasted, in bash, with ``curl`` a function that prints the
    arguments it was given (everything else, date, openssl and python3, is the real one);
    the headers, body and URL that curl would have sent."""
    run = subprocess.run(["bash", "-euc", 'curl() { printf "%s\\0" "$@"; }\n' + script],
                         capture_output=True, env={"PATH": "/usr/bin:/bin", **env}, check=True,
                         timeout=30)
    args = run.stdout.decode().split("\0")[:-1]
    headers, body = {}, b""
    for flag, value in zip(args, args[1:]):
        if flag == "-H":
            name, _, text = value.partition(": ")
            headers[name] = text
        elif flag == "-d":
            body = value.encode()
    url = next(a for a in args if a.startswith("http"))
    return headers, body, url


def _post_as_curl(headers: dict[str, str], body: bytes, url: str):
    """What curl would have sent, through the test client (CSRF enforced, as curl has none)."""
    meta = {"HTTP_" + k.upper().replace("-", "_"): v for k, v in headers.items()
            if k != "Content-Type"}
    return Client(enforce_csrf_checks=True).post(urlsplit(url).path, data=body,
                                                 content_type=headers["Content-Type"], **meta)


def test_the_pages_curl_example_works_as_pasted(alice, login):
    session = session_create(user=alice)
    client = login(alice)
    client.post("/webhooks/", {"session": session.pk, "name": "deploys"})
    hook = Webhook.objects.get()
    page = client.get(f"/webhooks/{hook.pk}/").content.decode()
    example = html.unescape(re.search(r"<pre>(ts=.*?)</pre>", page, re.S).group(1))
    assert "uuidgen" not in example  # not installed on a fresh Debian
    headers, body, url = _curl_as_pasted(example, {"SECRET": hook.secret})
    assert re.fullmatch(r"[0-9a-f-]{36}", headers["X-Hermes-Delivery"])
    response = _post_as_curl(headers, body, url)
    assert response.status_code == 202, response.content


def test_the_readme_curl_example_works_as_pasted(hook):
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = re.search(r"\n((?:    URL=.*\n)(?:    .*\n)+)", readme).group(1)
    example = "\n".join(line[4:] for line in block.splitlines())
    assert "uuidgen" not in example
    example = example.replace("<token>", hook.token).replace("<secret>",
                                                             shlex.quote(hook.secret))
    headers, body, url = _curl_as_pasted(example, {})
    assert url == f"http://127.0.0.1:8000/hooks/{hook.token}/"
    response = _post_as_curl(headers, body, url)
    assert response.status_code == 202, response.content


def test_a_tampered_body_with_a_replayed_signature_is_refused(hook):
    ts = str(int(time.time()))
    signature = sign(hook.secret, ts, b'{"amount": 1}')
    response = post(hook, b'{"amount": 1000}', ts=ts, signature=signature)
    assert response.status_code == 401 and not Turn.objects.exists()


def test_a_repeated_delivery_id_runs_nothing_and_unknown_tokens_are_404(hook):
    assert post(hook, b"{}").status_code == 202
    again = post(hook, b"{}")
    assert again.status_code == 200 and again.json()["duplicate"] is True
    assert Turn.objects.count() == 1
    assert list(WebhookDelivery.objects.order_by("id").values_list("outcome", flat=True)) == [
        "accepted", "duplicate"]
    missing = Client().post("/hooks/not-a-token/", data=b"{}", content_type="application/json")
    assert missing.status_code == 404
    assert Client().get(f"/hooks/{hook.token}/").status_code == 405


def test_a_captured_request_resent_under_new_delivery_ids_runs_once(hook):
    """F2: the delivery id is not signed, so the dedupe is on the signed bytes as well. A
    captured request, replayed with the same timestamp and signature but another
    X-Hermes-Delivery (and other unsigned headers changed), is a 200 duplicate; one turn runs
    on the simulator. The same body re-signed at a later timestamp is a new delivery."""
    ts, body = str(int(time.time())), json.dumps({"build": 7, "status": "failed"}).encode()
    captured = {"ts": ts, "signature": sign(hook.secret, ts, body)}
    assert post(hook, body, delivery="d1", **captured).status_code == 202
    for replay in ("d2", "d3", "x" * 100):
        again = post(hook, body, delivery=replay, **captured,
                     client=Client(enforce_csrf_checks=True, HTTP_USER_AGENT="replayer/1"))
        assert again.status_code == 200 and again.json()["duplicate"] is True, again.content
    assert Turn.objects.count() == 1
    turn_run_task.apply(args=[hook.session_id])
    turn = Turn.objects.get()
    assert turn.status == Turn.Status.COMPLETED, turn.error
    assert Message.objects.filter(session=hook.session, role="user").count() == 1
    assert list(WebhookDelivery.objects.order_by("id").values_list("delivery_id", "outcome")) \
        == [("d1", "accepted"), ("d2", "duplicate"), ("d3", "duplicate"),
            ("x" * 100, "duplicate")]
    assert WebhookDelivery.objects.get(outcome="accepted").replay_key == replay_key(ts, body)
    later = str(int(ts) + 1)
    assert post(hook, body, delivery="d4", ts=later).status_code == 202
    assert Turn.objects.count() == 2


def test_the_database_holds_one_accepted_row_per_replay_key(hook):
    """The backstop for two copies racing past the existence check: the unique constraint
    (webhook, replay_key) over accepted rows; refused and duplicate rows are not bound."""
    key = replay_key("1700000000", b"{}")
    WebhookDelivery.objects.create(webhook=hook, delivery_id="a", replay_key=key,
                                   outcome="accepted", status_code=202)
    WebhookDelivery.objects.create(webhook=hook, delivery_id="b", replay_key=key,
                                   outcome="duplicate", status_code=200)
    WebhookDelivery.objects.create(webhook=hook, delivery_id="c", outcome="accepted",
                                   status_code=202)
    WebhookDelivery.objects.create(webhook=hook, delivery_id="d", outcome="accepted",
                                   status_code=202)  # empty keys (old rows) do not collide
    with pytest.raises(IntegrityError):
        WebhookDelivery.objects.create(webhook=hook, delivery_id="e", replay_key=key,
                                       outcome="accepted", status_code=202)


@given(a=st.tuples(st.integers(0, 10**12), st.binary(max_size=64)),
       b=st.tuples(st.integers(0, 10**12), st.binary(max_size=64)))
def test_the_replay_key_is_equal_exactly_when_the_signed_bytes_are(a, b):
    key_a, key_b = replay_key(str(a[0]), a[1]), replay_key(str(b[0]), b[1])
    assert len(key_a) == 64 and (key_a == key_b) is (a == b)


def test_the_rate_limit_answers_429_and_the_rejection_log_is_bounded(hook, settings):
    settings.WEBHOOKS = {**settings.WEBHOOKS, "RATE_LIMIT": 2, "REJECT_LOG_LIMIT": 3}
    # Distinct bodies: the same signed bytes under a new id would be a replay (duplicate).
    codes = [post(hook, b'{"n": %d}' % i, delivery=f"r-{i}").status_code for i in range(4)]
    assert codes == [202, 202, 429, 429]
    assert Turn.objects.count() == 2
    for i in range(5):
        assert post(hook, b"{}", delivery=f"bad-{i}",
                    signature="sha256=" + "1" * 64).status_code == 401
    # 2 rate-limited + 1 bad signature logged, then the log limit (3 per window) holds.
    assert WebhookDelivery.objects.exclude(outcome="accepted").count() == 3


def test_owner_pages_create_rotate_delete_and_nobody_else_sees_them(alice, make_user, login):
    session = session_create(user=alice)
    bob = make_user("bob")
    bobs_session = session_create(user=bob)
    client = login(alice)
    refused = client.post("/webhooks/", {"session": bobs_session.pk, "name": "x"})
    assert refused.status_code == 400 and "Choose one of your sessions" in refused.content.decode()
    response = client.post("/webhooks/", {"session": session.pk, "name": "deploys",
                                          "instructions": "Summarise the deploy."})
    hook = Webhook.objects.get()
    assert response.status_code == 302
    page = client.get(f"/webhooks/{hook.pk}/").content.decode()
    assert hook.secret in page and f"/hooks/{hook.token}/" in page
    assert hook.secret not in client.get(f"/webhooks/{hook.pk}/").content.decode()  # once
    old = hook.secret
    client.post(f"/webhooks/{hook.pk}/rotate/")
    hook.refresh_from_db()
    assert hook.secret != old
    assert post(hook, b"{}", secret=old).status_code == 401
    assert post(hook, b"{}", delivery="new").status_code == 202
    page = client.get(f"/webhooks/{hook.pk}/").content.decode()
    assert "Accepted" in page and "Rejected" in page
    other = login(bob)
    assert other.get(f"/webhooks/{hook.pk}/").status_code == 404
    assert other.post(f"/webhooks/{hook.pk}/rotate/").status_code == 404
    assert other.post(f"/webhooks/{hook.pk}/delete/").status_code == 404
    assert "deploys" not in other.get("/webhooks/").content.decode()
    client = login(alice)
    client.post(f"/webhooks/{hook.pk}/delete/")
    assert not Webhook.objects.exists()


@given(secret=st.text(min_size=1, max_size=40), body=st.binary(max_size=200),
       flip=st.integers(min_value=0, max_value=63))
def test_any_changed_signature_digit_is_refused(secret, body, flip):
    ts = "1700000000"
    good = sign(secret, ts, body)
    assert verify(secret=secret, timestamp=ts, signature=good, delivery_id="d", body=body,
                  now=1700000000).ok
    digits = list(good[len("sha256="):])
    digits[flip] = "0" if digits[flip] != "0" else "1"
    bad = "sha256=" + "".join(digits)
    assert not verify(secret=secret, timestamp=ts, signature=bad, delivery_id="d", body=body,
                      now=1700000000).ok


@given(skew=st.integers(min_value=-10_000, max_value=10_000))
def test_the_replay_window_is_five_minutes_either_side(skew):
    ts, body = "1700000000", b"{}"
    verdict = verify(secret="s", timestamp=ts, signature=sign("s", ts, body), delivery_id="d",
                     body=body, now=1700000000 + skew)
    assert verdict.ok is (abs(skew) <= 300)
    if not verdict.ok:
        assert (verdict.status, "replay window" in verdict.reason) == (401, True)
