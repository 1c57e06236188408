"""Websockets under faults, against a real daphne and a real Celery worker process on a
redis-server of the test's own: Redis restarted mid-stream (the client reconnects and
replays from its last seq, nothing lost, nothing twice) and 100 clients reconnecting at
once (each gets exactly the events it missed)."""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import Counter

import pytest
import websockets
from django.test import Client

from simulator.script import Reply, Script
from sessions.models import RunEvent, Turn
from sessions.services import session_create, turn_start
from sessions.tasks import turn_run_task
from tests.reliability.conftest import PYTHON, free_port, wait_for

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(240)]


@pytest.fixture
def stack(procs, service_env, own_redis, celery_worker_proc):
    """daphne + one worker, both on ``own_redis`` (broker and channel layer)."""
    env = {**service_env, "REDIS_URL": own_redis.url}
    port = free_port()
    web = procs("daphne", [str(PYTHON), "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                           "hermes_web.asgi:application"], env)
    wait_for(lambda: "Listening on" in web.output() or web.popen.poll() is not None,
             timeout=60, what="daphne")
    assert web.popen.poll() is None, web.output()[-2000:]
    worker = celery_worker_proc("worker-ws", env)
    return {"port": port, "redis": own_redis, "web": web, "worker": worker, "env": env}


def cookie_for(user) -> str:
    client = Client()
    client.force_login(user, backend="django.contrib.auth.backends.ModelBackend")
    return f"sessionid={client.cookies['sessionid'].value}"


class SocketClient:
    """What static/chat.js does: hello with the last seq seen, apply each frame once, in
    seq order, reconnect with backoff when the socket closes."""

    def __init__(self, port: int, session_id: int, cookie: str):
        self.url = f"ws://127.0.0.1:{port}/ws/sessions/{session_id}/"
        self.headers = {"Cookie": cookie, "Origin": f"http://127.0.0.1:{port}"}
        self.last_seq = 0
        self.seqs: list[int] = []
        self.types: list[str] = []
        self.reconnects = 0
        self.errors: list[str] = []
        self.socket = None
        self.opened_at = 0.0  # time.monotonic() of the last completed handshake

    async def drop(self) -> None:
        """The network goes away under the client (a phone in a tunnel)."""
        if self.socket is not None:
            await self.socket.close()

    async def run(self, *, until: str = "", until_seq: int = 0, timeout: float,
                  on_open=None) -> None:
        """Follow the session until an event of type ``until`` (or seq ``until_seq``)."""
        if until_seq and self.last_seq >= until_seq:
            return
        deadline = time.monotonic() + timeout
        attempt = 0
        while time.monotonic() < deadline:
            try:
                async with websockets.connect(self.url, additional_headers=self.headers,
                                              open_timeout=10) as ws:
                    self.socket = ws
                    self.opened_at = time.monotonic()
                    await ws.send(json.dumps({"type": "hello", "last_seq": self.last_seq}))
                    if on_open is not None:
                        await on_open(ws)
                        on_open = None
                    attempt = 0
                    while True:
                        left = deadline - time.monotonic()
                        frame = json.loads(await asyncio.wait_for(ws.recv(), timeout=left))
                        seq = frame.get("seq")
                        if not isinstance(seq, int):
                            continue
                        assert seq not in self.seqs, f"seq {seq} delivered twice"
                        assert seq == self.last_seq + 1, (self.last_seq, seq)
                        self.last_seq = seq
                        self.seqs.append(seq)
                        self.types.append(frame["type"])
                        if frame["type"] == until or (until_seq and seq >= until_seq):
                            return
            except (OSError, asyncio.TimeoutError,
                    websockets.exceptions.WebSocketException) as exc:
                self.errors.append(f"{type(exc).__name__}: {str(exc)[:60]}")
                self.reconnects += 1
                attempt += 1
                # static/chat.js's backoff: exponential, capped at 30 s, jittered by half,
                # so a hundred sockets dropped together do not come back together.
                await asyncio.sleep(min(30.0, 0.5 * 2 ** attempt) * (0.5 + random.random() / 2))
        raise AssertionError(f"no {until} within {timeout} s (last seq {self.last_seq})")


def test_redis_restart_mid_stream_the_socket_reconnects_and_replays_from_its_last_seq(
        make_user, simulator, stack):
    text = " ".join(f"w{n}" for n in range(150))
    simulator.state.script = Script(lambda request: Reply(text=text, token_delay=0.04))
    user = make_user("max")
    session = session_create(user=user)
    cookie = cookie_for(user)
    dropped = SocketClient(stack["port"], session.pk, cookie)  # loses its connection too
    stayed = SocketClient(stack["port"], session.pk, cookie)  # keeps its socket open
    redis = stack["redis"]
    timings: dict = {}

    async def send_message(ws):
        await ws.send(json.dumps({"type": "message", "text": "a long answer please"}))

    async def scenario():
        follows = [asyncio.create_task(dropped.run(until="turn.finished", timeout=150,
                                                   on_open=send_message)),
                   asyncio.create_task(stayed.run(until="turn.finished", timeout=150))]
        await asyncio.to_thread(wait_for, lambda: len(dropped.seqs) >= 5, timeout=60,
                                what="the stream to reach the socket")
        await asyncio.to_thread(redis.kill)
        await dropped.drop()
        timings["down"] = time.monotonic()
        await asyncio.sleep(1.0)
        await asyncio.to_thread(redis.start)
        timings["up"] = time.monotonic()
        await asyncio.gather(*follows)
        timings["done"] = time.monotonic()

    try:
        asyncio.run(scenario())
    except BaseException:
        print(stack["web"].output()[-4000:], stack["worker"].output()[-4000:])
        raise
    turn = Turn.objects.get(session=session)
    assert turn.status == Turn.Status.COMPLETED, turn.error
    stored = list(RunEvent.objects.filter(session=session).order_by("seq")
                  .values_list("seq", flat=True))
    # Every stored event, once, in order, on both sockets: nothing lost, nothing twice.
    assert dropped.seqs == stored and stayed.seqs == stored
    assert dropped.reconnects >= 1
    streamed = "".join(e.payload["text"] for e in RunEvent.objects.filter(
        session=session, type="text.delta").order_by("seq"))
    assert streamed.strip() == text
    print(f"\nRECOVERY redis-restart: caught up {timings['done'] - timings['up']:.1f} s after "
          f"Redis was back (down {timings['up'] - timings['down']:.1f} s); "
          f"reconnects: dropped {dropped.reconnects}, stayed {stayed.reconnects}")


def test_100_clients_reconnecting_at_once_each_get_exactly_what_they_missed(
        make_user, simulator, stack):
    simulator.state.script = Script(lambda request: Reply(text="short reply"))
    user = make_user("ned")
    session = session_create(user=user)
    cookie = cookie_for(user)
    # Some history first: three turns' events in the database.
    for n in range(3):
        turn_start(session=session, user=user, text=f"hello {n}")
    turn_run_task.apply(args=[session.pk])  # in this process: the history is only setup
    stored = list(RunEvent.objects.filter(session=session).order_by("seq")
                  .values_list("seq", flat=True))
    assert len(stored) > 20
    clients = [SocketClient(stack["port"], session.pk, cookie) for _ in range(100)]
    for index, client in enumerate(clients):  # each was somewhere else when it dropped
        client.last_seq = index % len(stored)
    last = stored[-1]

    started = time.monotonic()

    async def everyone():
        await asyncio.gather(*(c.run(until_seq=last, timeout=120) for c in clients))

    try:
        asyncio.run(everyone())
    except BaseException:
        print(Counter(e for c in clients for e in c.errors), [c.last_seq for c in clients])
        print(stack["web"].output()[-3000:])
        raise
    elapsed = time.monotonic() - started
    for index, client in enumerate(clients):
        assert client.seqs == stored[index % len(stored):]
    retries = sum(c.reconnects for c in clients)
    opened = sorted(c.opened_at - started for c in clients)
    errors = Counter(e for c in clients for e in c.errors).most_common(4)
    # Fewer than one retry per client: daphne takes the handshakes as they come. Before the
    # logins ran off daphne's one database thread, 2-4 handshakes per client were dropped
    # at its 5 s connect timeout (185-405 retries, 20-52 s on this host).
    assert retries < len(clients), errors
    print(f"\nRECOVERY 100-clients-reconnect: all caught up in {elapsed:.1f} s "
          f"(handshakes done: median {opened[len(opened) // 2]:.1f} s, last "
          f"{opened[-1]:.1f} s; {retries} connection retries {errors})")
