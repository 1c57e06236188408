"""Token → browser-socket delay with 20 (or 100) sessions streaming at once, events lost, and
the floor of the relay (issue 2, "Speed"; issue 15 target 2: p95 under 100 ms with 20
sessions, under 150 ms with 100, zero lost).

The real path end to end, loopback only:

    simulator (this process, 15 ms per token) ─HTTP SSE─► Celery worker (turn_run_task:
    anthropic SDK, DbSink batching ~50 ms, RunEvent row, publish after commit) ─channel layer─►
    daphne (SessionConsumer) ─websocket─► N clients (this process, RFC 6455 over asyncio)

Embedded mode by default: ``daphne hermes_web.embedded:application`` as a subprocess, which
runs Celery's worker threads (N) and the in-memory channel layer inside the web process;
SQLite (WAL) in a temporary directory, or PostgreSQL when DATABASE_URL is set (database
``hermes_bench_stream_<pid>``, dropped afterwards, so concurrent runs never share one).
Services mode when REDIS_URL is set: ``daphne hermes_web.asgi:application`` plus a ``celery
worker -P threads -c N`` subprocess, Redis (database HERMES_BENCH_REDIS_DB, default 13) as
broker and channel layer. The simulator stays in this process either way (provider set to
it); the daphne port is a free one.

Every streamed token is a unique word (``q`` + two session letters + 3 index letters, one
simulator token each). The simulator's chunk writer is wrapped to stamp each token's send
time (time.monotonic_ns, right after the chunk is flushed to the socket); each client stamps
a token when the text.delta frame carrying it arrives. Delay = receive − send, so the ~50 ms
delta batching of issue 2 is part of what is measured. Lost: tokens sent but never received,
seq gaps, and each stored assistant message (message.added) compared in full with the text
the simulator sent for it. Time to first token (TTFT): the same delay for the first token of
each reply (two replies per session: 60 tokens and a tool call, then 200 tokens).

One short turn on a spare session runs first and is not measured (``--cold`` skips it): the
servers' first turn pays one-off start-up costs (the worker imports the provider SDK, about
1-2 s of its GIL). A second table splits each token's delay at the event's stored time
(``ts``) and, in services mode, at the moment its PUBLISH reached Redis (a subscriber in this
process on the same group channels): worker side (read, batch, INSERT), publish (commit,
publisher, Redis) and delivery (layer, consumer, daphne, socket).

The floor (services mode), on the same daphne right after the measured turns: the text.delta
frames the clients received, replayed to fresh sessions at the times they were stored, as a
bare Redis PUBLISH (serialised by the channel layer, to the group channel the consumer listens
on) → the same SessionConsumer → websocket client; delay = publish → receive per token. The
ratio is the measured p95 over the floor's p95.

Variants (``--no-variants`` skips them; each on fresh servers): the first delta of a reply
batched like the rest (HERMES_FIRST_DELTA_FLUSH=0), and no batching at all
(HERMES_DELTA_BATCH_MS=0): what the 50 ms window costs in delay and what it saves in writes
(text.delta events, each an INSERT and a PUBLISH), and what the first-token flush buys in TTFT.

Run: ``python benchmarks/bench_stream.py [--sessions 100]`` (``make bench`` runs 20 and 100).
Bounded to a few minutes; exits 0 even when a target is missed (prints FAIL).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (ROOT, django_boot, free_port, percentile,  # noqa: E402
                               prepare_environment, print_table, verdict)

TARGET_P95_MS = {20: 100.0, 100: 150.0}
"""p95 target (ms) by session count (issue 15 target 2); a count between uses the next one up."""
SESSIONS = 20
TOKEN_DELAY = 0.015
"""Seconds between streamed tokens (a fast model: ~65 tokens/s)."""
FIRST_TOKENS = 60
"""Tokens streamed before the tool call of the first iteration."""
FINAL_TOKENS = 200
"""Tokens of the final answer (second iteration)."""
TURN_TIMEOUT = 75.0
"""Seconds to wait for every session's turn.finished."""
LETTERS = "abcdefghijklmnopqrstuvwxyz"
WARM_UP_TEXT = "warm up"
"""The text of the one unmeasured turn run first (see ``warm_up``)."""


def session_tag(session_index: int) -> str:
    """Two letters naming a session in its token words (up to 676 sessions)."""
    return LETTERS[session_index // 26] + LETTERS[session_index % 26]


def token_word(session_index: int, n: int) -> str:
    """A unique lower-case word of 6 letters (the simulator streams it as one token)."""
    return "q" + session_tag(session_index) + LETTERS[n // 676] + LETTERS[n // 26 % 26] + \
        LETTERS[n % 26]


def script_text(session_index: int, start: int, count: int) -> str:
    return " ".join(token_word(session_index, n) for n in range(start, start + count))


# --- the simulated model and its send stamps ---------------------------------------------------
SENT: dict[str, int] = {}
"""token word -> time.monotonic_ns() right after its chunk was flushed."""
SENT_WALL: dict[str, float] = {}
"""token word -> time.time() at the same moment: compared with the event's ``ts`` (the
worker's wall clock when it stored the event) to split the delay into stages."""
SENT_LOCK = threading.Lock()


def stream_policy(request):
    """"stream bench <i>": 60 tokens and a read_file call, then 200 tokens of answer."""
    from simulator.script import Reply, ToolCallSpec

    text = request.last_user_text
    if text == WARM_UP_TEXT:
        return Reply(text="warming", tool_calls=(
            ToolCallSpec(name="read_file", input={"path": "README.md"}),)) \
            if not request.tool_results else Reply(text="ready")
    if not text.startswith("stream bench "):
        return Reply(text="(benchmark) unexpected request")
    index = int(text.split()[-1])
    if not request.tool_results:
        return Reply(text=script_text(index, 0, FIRST_TOKENS), token_delay=TOKEN_DELAY,
                     tool_calls=(ToolCallSpec(name="read_file", input={"path": "README.md"}),))
    return Reply(text=script_text(index, FIRST_TOKENS, FINAL_TOKENS), token_delay=TOKEN_DELAY)


def stamp_sends() -> None:
    """Wrap the simulator's chunk writer: stamp every text token as it leaves."""
    from simulator import server

    write = server._Handler.write

    def stamped(self, data: bytes) -> None:
        write(self, data)
        if b'"text_delta"' not in data:
            return
        now, wall = time.monotonic_ns(), time.time()
        body = data.split(b"data: ", 1)[1]
        piece = json.loads(body)["delta"]["text"].strip()
        if piece:
            with SENT_LOCK:
                SENT[piece] = now
                SENT_WALL[piece] = wall

    server._Handler.write = stamped


# --- the browser sockets -----------------------------------------------------------------------
@dataclass
class Watch:
    """What one socket saw for one session."""

    index: int
    session_id: int
    received: dict[str, int] = field(default_factory=dict)
    stages: dict[str, tuple[float, float]] = field(default_factory=dict)
    """token word -> (event ts, receive time.time()) for the stage breakdown."""
    deltas: list[tuple[float, str]] = field(default_factory=list)
    """Each text.delta frame received: (its stored ts, its text): the floor replays them."""
    duplicates: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    """Frames received by type (a retried model call shows as turn.recovered, ...)."""
    seqs: list[int] = field(default_factory=list)
    assistant_texts: list[str] = field(default_factory=list)
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    status: str = ""
    errors: list[str] = field(default_factory=list)


class WebSocket:
    """A minimal RFC 6455 client over asyncio streams (text frames, ping, close): enough to
    be a browser tab, and free of the txaio framework choice Django's daphne app makes in
    this process."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer

    @classmethod
    async def connect(cls, port: int, path: str, headers: dict[str, str]) -> WebSocket:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [f"GET {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Upgrade: websocket",
                 "Connection: Upgrade", f"Sec-WebSocket-Key: {key}",
                 "Sec-WebSocket-Version: 13", *(f"{k}: {v}" for k, v in headers.items())]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        status = await reader.readline()
        if b" 101 " not in status:
            raise RuntimeError(f"websocket refused: {status!r}")
        while (await reader.readline()) not in (b"\r\n", b""):
            pass
        return cls(reader, writer)

    async def send_text(self, text: str, opcode: int = 1) -> None:
        data = text.encode()
        mask = os.urandom(4)
        head = bytes([0x80 | opcode])
        if len(data) < 126:
            head += bytes([0x80 | len(data)])
        elif len(data) < 65536:
            head += bytes([0x80 | 126]) + struct.pack("!H", len(data))
        else:
            head += bytes([0x80 | 127]) + struct.pack("!Q", len(data))
        self.writer.write(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))
        await self.writer.drain()

    async def receive(self) -> str | None:
        """The next text message, or None when the server closed."""
        parts: list[bytes] = []
        while True:
            b0, b1 = await self.reader.readexactly(2)
            size = b1 & 0x7F
            if size == 126:
                size = struct.unpack("!H", await self.reader.readexactly(2))[0]
            elif size == 127:
                size = struct.unpack("!Q", await self.reader.readexactly(8))[0]
            mask = await self.reader.readexactly(4) if b1 & 0x80 else b""
            data = await self.reader.readexactly(size)
            if mask:
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
            opcode = b0 & 0x0F
            if opcode == 8:
                return None
            if opcode == 9:
                await self.send_text(data.decode("latin-1"), opcode=10)
                continue
            if opcode in (0, 1, 2):
                parts.append(data)
                if b0 & 0x80:
                    return b"".join(parts).decode()

    async def close(self) -> None:
        try:
            await self.send_text("", opcode=8)
        except OSError:
            pass
        self.writer.close()


def on_frame(watch: Watch, frame: dict, now: int, wall: float) -> None:
    if "seq" not in frame:
        watch.errors.append(str(frame)[:200])
        return
    watch.seqs.append(frame["seq"])
    kind = frame["type"]
    watch.kinds[kind] = watch.kinds.get(kind, 0) + 1
    if kind == "text.delta":
        watch.deltas.append((frame.get("ts", 0.0), frame["payload"]["text"]))
        for word in frame["payload"]["text"].split():
            if word in watch.received:
                watch.duplicates += 1
            watch.received[word] = now
            watch.stages[word] = (frame.get("ts", 0.0), wall)
    elif kind == "message.added":
        message = frame["payload"]["message"]
        if message["role"] == "assistant":
            watch.assistant_texts.append(message["content"])
    elif kind in ("turn.finished", "turn.failed", "turn.cancelled"):
        watch.status = (kind if kind != "turn.failed"
                        else f"turn.failed: {frame['payload'].get('reason')}")
        watch.finished.set()


async def read_socket(watch: Watch, socket: WebSocket) -> None:
    try:
        while (text := await socket.receive()) is not None:
            on_frame(watch, json.loads(text), time.monotonic_ns(), time.time())
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    if not watch.finished.is_set():
        watch.status = watch.status or "socket closed"
        watch.finished.set()


async def warm_up(port: int, cookie: str, session_id: int) -> str:
    """One short turn (a tool call, then a word) through the same servers before the
    measured ones, not measured: a worker that has served before has imported the provider
    SDK, compiled the templates and opened its connections; the first turn after a process
    starts pays that once (about 1-2 s of the worker's GIL on this machine), which is a
    start-up cost, not the streaming delay issue 2 sets a target for."""
    headers = {"Origin": f"http://127.0.0.1:{port}", "Cookie": f"sessionid={cookie}"}
    watch = Watch(index=-1, session_id=session_id)
    socket = await WebSocket.connect(port, f"/ws/sessions/{session_id}/", headers)
    await socket.send_text(json.dumps({"type": "hello", "last_seq": 0}))
    reader = asyncio.create_task(read_socket(watch, socket))
    await socket.send_text(json.dumps({"type": "message", "text": WARM_UP_TEXT}))
    try:
        await asyncio.wait_for(watch.finished.wait(), TURN_TIMEOUT)
    except asyncio.TimeoutError:
        watch.status = "timeout"
    await socket.close()
    reader.cancel()
    return watch.status


def group_channel(layer, group: str) -> str:
    """The Redis channel a pub/sub channel layer uses for ``group`` (the layer's own rule;
    called inside a running loop)."""
    return layer._get_layer()._get_group_channel_name(group)


async def monitor(redis_url: str, session_ids: list[int], seen: dict[str, tuple[float, float]],
                  ready: asyncio.Event) -> None:
    """Subscribe to the sessions' group channels beside daphne and stamp (time.time()) each
    token's text.delta as its PUBLISH reaches Redis, with the ``sent_at`` the worker put on
    the message when it handed it to its publisher (after commit): splits the delivery
    stage in three."""
    import redis.asyncio as aioredis
    from channels.layers import get_channel_layer

    from sessions.events import session_group

    layer = get_channel_layer()
    client = aioredis.from_url(redis_url)
    pubsub = client.pubsub()
    await pubsub.subscribe(*(group_channel(layer, session_group(s)) for s in session_ids))
    ready.set()
    try:
        while True:
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
            if message is None:
                continue
            now = time.time()
            body = layer.deserialize(message["data"])
            events = body.get("events") or ([body["event"]] if "event" in body else [])
            handed = body.get("sent_at", 0.0)
            for event in events:
                if event.get("type") == "text.delta":
                    for word in event["payload"]["text"].split():
                        seen.setdefault(word, (handed, now))
    finally:
        await pubsub.aclose()
        await client.aclose()


async def open_watches(port: int, cookie: str, sessions: list[tuple[int, int]]
                       ) -> tuple[list[Watch], list[WebSocket], list[asyncio.Task]]:
    headers = {"Origin": f"http://127.0.0.1:{port}", "Cookie": f"sessionid={cookie}"}
    watches: list[Watch] = []
    sockets: list[WebSocket] = []
    readers = []
    for index, session_id in sessions:
        watch = Watch(index=index, session_id=session_id)
        socket = await WebSocket.connect(port, f"/ws/sessions/{session_id}/", headers)
        await socket.send_text(json.dumps({"type": "hello", "last_seq": 0}))
        readers.append(asyncio.create_task(read_socket(watch, socket)))
        watches.append(watch)
        sockets.append(socket)
    await asyncio.sleep(0.2)  # the hello backlogs are sent
    return watches, sockets, readers


async def close_watches(sockets: list[WebSocket], readers: list[asyncio.Task]) -> None:
    for socket in sockets:
        await socket.close()
    for reader in readers:
        reader.cancel()


async def watch_all(port: int, cookie: str, sessions: list[tuple[int, int]],
                    redis_url: str | None, published: dict[str, tuple[float, float]]
                    ) -> list[Watch]:
    """Open a socket per session, send each its message, wait for every turn.finished."""
    watcher = None
    if redis_url:
        ready = asyncio.Event()
        watcher = asyncio.create_task(monitor(redis_url, [s for _, s in sessions],
                                              published, ready))
        await asyncio.wait_for(ready.wait(), 10)
    watches, sockets, readers = await open_watches(port, cookie, sessions)
    for watch, socket in zip(watches, sockets):  # as a browser does: over the socket
        await socket.send_text(json.dumps({"type": "message",
                                           "text": f"stream bench {watch.index}"}))
    try:
        await asyncio.wait_for(asyncio.gather(*(w.finished.wait() for w in watches)),
                               TURN_TIMEOUT)
    except asyncio.TimeoutError:
        for watch in watches:
            if not watch.finished.is_set():
                watch.status = "timeout"
    await asyncio.sleep(0.3)  # late frames (none expected) would still count
    await close_watches(sockets, readers)
    if watcher is not None:
        watcher.cancel()
    return watches


async def floor_relay(port: int, cookie: str, sessions: list[tuple[int, int]],
                      replay: dict[int, list[tuple[float, str]]], redis_url: str,
                      sent: dict[str, int]) -> list[Watch]:
    """The floor: ``replay`` (session index -> [(seconds from the start, text)], the frames
    the measured run's clients received, at their stored times) PUBLISHed bare to fresh
    sessions' group channels, each serialised by the channel layer as the publisher does,
    seq 1, 2, ... (no gap: the consumer never reads the database), through the same daphne
    and consumer to a socket. ``sent``: token word -> monotonic_ns just before its PUBLISH."""
    import redis.asyncio as aioredis
    from channels.layers import get_channel_layer

    from sessions.events import session_group

    layer = get_channel_layer()
    client = aioredis.from_url(redis_url)
    watches, sockets, readers = await open_watches(port, cookie, sessions)
    start = time.monotonic()

    async def publish(watch: Watch) -> None:
        channel = group_channel(layer, session_group(watch.session_id))
        for seq, (offset, text) in enumerate(replay.get(watch.index, []), 1):
            wait = start + offset - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            stamp = time.monotonic_ns()
            event = {"seq": seq, "type": "text.delta", "session_id": watch.session_id,
                     "payload": {"turn_id": 0, "text": text}, "ts": time.time()}
            data = layer.serialize({"type": "run.event", "event": event,
                                    "sent_at": event["ts"]})
            for word in text.split():
                sent[word] = stamp
            await client.publish(channel, data)

    await asyncio.gather(*(publish(w) for w in watches))
    deadline = time.monotonic() + 5.0  # the last frames arrive (or count as lost)
    while time.monotonic() < deadline and any(
            len(w.received) < sum(len(t.split()) for _, t in replay.get(w.index, []))
            for w in watches):
        await asyncio.sleep(0.05)
    await close_watches(sockets, readers)
    await client.aclose()
    return watches


# --- processes -----------------------------------------------------------------------------------
def start_servers(bench, port: int, threads: int, log_dir: Path, label: str,
                  overrides: dict[str, str], workers: int = 1) -> list[subprocess.Popen]:
    """daphne, then (services mode) ``workers`` Celery worker processes sharing ``threads``
    threads between them (each its own GIL: the delivery tail waits for the GIL)."""
    env = {**os.environ, **bench.env, "HERMES_WORKER_THREADS": str(threads), **overrides}
    python = sys.executable
    procs = []
    app = "hermes_web.asgi:application" if bench.redis_url else "hermes_web.embedded:application"
    with open(log_dir / f"daphne-{label}.log", "w") as log:
        procs.append(subprocess.Popen(
            [python, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), app],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT))
    for number in range(workers if bench.redis_url else 0):
        share = threads // workers + (number < threads % workers)
        suffix = "" if number == 0 else f"-{number + 1}"
        with open(log_dir / f"worker-{label}{suffix}.log", "w") as log:
            procs.append(subprocess.Popen(
                [python, "-m", "celery", "-A", "hermes_web", "worker", "-P", "threads",
                 "-c", str(share), "-l", "WARNING", "--without-heartbeat",
                 "--without-mingle", "--without-gossip",
                 "-n", f"bench-{os.getpid()}{suffix}@%h"],
                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            break
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=1)
            return procs
        except Exception:
            time.sleep(0.2)
    stop(procs)
    raise RuntimeError("the servers did not start: see " + str(log_dir))


def stop(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


# --- how busy the machine was ----------------------------------------------------------------------
def cpu_sample(pids: list[int]) -> tuple[float, list[float], float]:
    """(machine busy CPU seconds over all cores, CPU seconds of each of ``pids`` with its
    threads, time.monotonic()) from /proc; zeros where /proc is missing."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
        values = [int(v) for v in fields]
        busy = (sum(values) - values[3] - (values[4] if len(values) > 4 else 0)) / tick
    except (OSError, ValueError):
        busy = 0.0
    own = []
    for pid in pids:
        try:
            parts = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            own.append((int(parts[11]) + int(parts[12])) / tick)
        except (OSError, ValueError, IndexError):
            own.append(0.0)
    return busy, own, time.monotonic()


def cpu_by_command() -> dict[str, float]:
    """CPU seconds used so far by every live process, summed by command name (/proc; the
    difference of two samples shows what ran meanwhile: postgres, redis-server, other
    engineers' pythons)."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    out: dict[str, float] = {}
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            head, tail = (entry / "stat").read_text().rsplit(")", 1)
            parts = tail.split()
            name = head.split("(", 1)[1]
            out[name] = out.get(name, 0.0) + (int(parts[11]) + int(parts[12])) / tick
        except (OSError, ValueError, IndexError):
            continue
    return out


def cpu_share(before, after) -> tuple[float, ...]:
    """(cores busy on the machine, then cores used by each process sampled) on average
    between two cpu_sample()s: what else ran shows in the difference."""
    wall = max(after[2] - before[2], 1e-9)
    return ((after[0] - before[0]) / wall,
            *((a - b) / wall for a, b in zip(after[1], before[1])))


# --- one configuration ---------------------------------------------------------------------------
@dataclass
class Run:
    """One configuration's measured turns (and, for the main one, its floor)."""

    label: str
    overrides: dict[str, str]
    watches: list[Watch] = field(default_factory=list)
    sent: dict[str, int] = field(default_factory=dict)
    sent_wall: dict[str, float] = field(default_factory=dict)
    published: dict[str, tuple[float, float]] = field(default_factory=dict)
    """token word -> (handed to the publisher, PUBLISH at Redis), time.time()."""
    wall: float = 0.0
    cpu: tuple[float, ...] = (float("nan"),) * 4
    """Cores busy on the machine, then cores used by this process (simulator and clients),
    daphne and the worker, during the measured turns (cpu_share); PostgreSQL, Redis and
    other engineers' work are the difference."""
    refused: int = 0
    """Connections PostgreSQL refused ("too many clients") in daphne's and the worker's
    logs: a turn or a socket failed for want of a connection, not for the code's sake."""
    started_ns: int = 0
    """time.monotonic_ns() when the clients started sending their messages."""
    cpu_top: list[tuple[str, float]] = field(default_factory=list)
    """The busiest commands (cores, by /proc command name; exited processes not counted)
    during the measured turns."""
    warm: str = ""
    floor: list[Watch] = field(default_factory=list)
    floor_sent: dict[str, int] = field(default_factory=dict)


def run_config(run: Run, *, bench, user, cookie: str, count: int, cold: bool,
               floor: bool, profile: str = "", profile_dir: str = "",
               workers: int = 1) -> Run:
    """Fresh servers with ``run.overrides``, a warm-up turn, ``count`` sessions' turns at
    once, then (``floor``, services mode) the floor relay on the same daphne. ``profile``:
    a py-spy executable that samples daphne and the worker during the measured turns (raw
    collapsed stacks in ``profile_dir``)."""
    from sessions.services import session_create

    port = free_port()
    procs = start_servers(bench, port, count, bench.tmp, run.label.split()[0], run.overrides,
                          workers=workers)
    try:
        if not cold:
            warm = session_create(user=user, title="warm-up").pk
            run.warm = asyncio.run(warm_up(port, cookie, warm))
        sessions = [(i, session_create(user=user, title=f"stream {i}").pk)
                    for i in range(count)]
        with SENT_LOCK:
            SENT.clear()
            SENT_WALL.clear()
        spies = [subprocess.Popen(
            [profile, "record", "-p", str(proc.pid), "-r", "100", "--nonblocking", "-f",
             "raw", "-o", str(Path(profile_dir) / f"{run.label.split()[0]}-{name}.txt")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for proc, name in zip(procs, ("daphne", "worker"))] if profile else []
        ours = [os.getpid(), *(proc.pid for proc in procs)]
        before, by_command = cpu_sample(ours), cpu_by_command()
        t0 = time.monotonic()
        run.started_ns = time.monotonic_ns()
        run.watches = asyncio.run(watch_all(port, cookie, sessions, bench.redis_url,
                                            run.published))
        run.wall = time.monotonic() - t0
        run.cpu = cpu_share(before, cpu_sample(ours))
        used = {name: (t - by_command.get(name, 0.0)) / max(run.wall, 1e-9)
                for name, t in cpu_by_command().items()}
        run.cpu_top = sorted(((n, c) for n, c in used.items() if c >= 0.01),
                             key=lambda item: -item[1])[:6]
        for spy in spies:  # py-spy writes its file on SIGINT
            spy.send_signal(signal.SIGINT)
            spy.wait(timeout=30)
        with SENT_LOCK:
            run.sent, run.sent_wall = dict(SENT), dict(SENT_WALL)
        if floor and bench.redis_url:
            stored = [ts for w in run.watches for ts, _ in w.deltas if ts]
            first = min(stored) if stored else 0.0
            replay = {w.index: [(max(0.0, ts - first), text) for ts, text in w.deltas]
                      for w in run.watches}
            fresh = [(i, session_create(user=user, title=f"floor {i}").pk)
                     for i in range(count)]
            run.floor = asyncio.run(floor_relay(port, cookie, fresh, replay, bench.redis_url,
                                                run.floor_sent))
    finally:
        stop(procs)
        label = run.label.split()[0]
        for name in (f"daphne-{label}.log", f"worker-{label}.log",
                     *(f"worker-{label}-{n}.log" for n in range(2, workers + 1))):
            try:
                text = (bench.tmp / name).read_text(errors="replace")
            except OSError:
                continue
            run.refused += text.count("too many clients already")
    return run


def connections_free() -> tuple[int, int]:
    """(PostgreSQL's max_connections, connections open now) on the benchmark's server, or
    (0, 0) on SQLite: a run needs about one per session (worker threads) plus daphne's."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return 0, 0
    with connection.cursor() as cursor:
        cursor.execute("SHOW max_connections")
        limit = int(cursor.fetchone()[0])
        cursor.execute("SELECT count(*) FROM pg_stat_activity")
        return limit, int(cursor.fetchone()[0])


# --- figures ---------------------------------------------------------------------------------------
def session_sent(sent: dict[str, int], index: int) -> dict[str, int]:
    tag = session_tag(index)
    return {w: t for w, t in sent.items() if w[1:3] == tag}


@dataclass
class Figures:
    delays: list[float]
    ttft: list[float]
    ttft_by_reply: tuple[list[float], list[float]]
    """TTFT of the first reply (turn start) and of the second (after the tool call)."""
    rows: list[tuple]
    lost: int
    gaps: int
    mismatched: int
    finished: int
    errors: int
    deltas_per_reply: float
    events_per_session: float
    writes_per_second: float
    """text.delta events per second of streaming (a reply's first to last token sent):
    writes per reply grow with the stream's wall time, which load stretches; this does not."""


def figures(run: Run) -> Figures:
    delays: list[float] = []
    ttft: list[float] = []
    by_reply: tuple[list[float], list[float]] = ([], [])
    rows = []
    lost_total = gaps_total = mismatched = 0
    streamed_ns = 0
    for watch in run.watches:
        sent = session_sent(run.sent, watch.index)
        got = watch.received
        lost = len(set(sent) - set(got))
        extra = len(set(got) - set(sent))
        session_delays = [(got[w] - sent[w]) / 1e6 for w in sent if w in got]
        delays += session_delays
        for reply, first in enumerate((token_word(watch.index, 0),
                                       token_word(watch.index, FIRST_TOKENS))):
            if first in sent and first in got:
                ttft.append((got[first] - sent[first]) / 1e6)
                by_reply[reply].append(ttft[-1])
        for start, count in ((0, FIRST_TOKENS), (FIRST_TOKENS, FINAL_TOKENS)):
            times = [sent[w] for w in (token_word(watch.index, n)
                                       for n in range(start, start + count)) if w in sent]
            if len(times) > 1:
                streamed_ns += max(times) - min(times)
        expected = [script_text(watch.index, 0, FIRST_TOKENS),
                    script_text(watch.index, FIRST_TOKENS, FINAL_TOKENS)]
        texts_ok = watch.assistant_texts == expected
        seqs = watch.seqs
        gaps = (len(set(range(1, max(seqs) + 1)) - set(seqs)) if seqs else 0) + \
            (len(seqs) - len(set(seqs)))
        lost_total += lost + extra + watch.duplicates
        gaps_total += gaps
        mismatched += not texts_ok
        rows.append((f"session {watch.session_id}", len(sent), len(got), lost,
                     watch.duplicates, percentile(session_delays, 50),
                     percentile(session_delays, 95), len(watch.deltas), gaps,
                     "yes" if texts_ok else "NO", watch.status or "no end",
                     ",".join(f"{k}:{n}" for k, n in sorted(watch.kinds.items())
                              if k not in ("text.delta", "message.added", "tool.called",
                                           "tool.result", "usage", "turn.started",
                                           "turn.queued", "turn.finished"))))
    count = max(1, len(run.watches))
    return Figures(
        delays=delays, ttft=ttft, ttft_by_reply=by_reply, rows=rows, lost=lost_total, gaps=gaps_total,
        mismatched=mismatched,
        finished=sum(1 for w in run.watches if w.status == "turn.finished"),
        errors=sum(len(w.errors) for w in run.watches),
        deltas_per_reply=sum(len(w.deltas) for w in run.watches) / (2 * count),
        events_per_session=sum(len(w.seqs) for w in run.watches) / count,
        writes_per_second=sum(len(w.deltas) for w in run.watches) / max(streamed_ns / 1e9,
                                                                         1e-9))


def floor_delays(run: Run) -> list[float]:
    out: list[float] = []
    for watch in run.floor:
        sent = session_sent(run.floor_sent, watch.index)
        out += [(watch.received[w] - t) / 1e6 for w, t in sent.items() if w in watch.received]
    return out


def target_for(count: int) -> float:
    for sessions in sorted(TARGET_P95_MS):
        if count <= sessions:
            return TARGET_P95_MS[sessions]
    return TARGET_P95_MS[max(TARGET_P95_MS)]


# --- main ------------------------------------------------------------------------------------------
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=SESSIONS)
    parser.add_argument("--cold", action="store_true",
                        help="no warm-up turn: measure the servers' first turns too")
    parser.add_argument("--no-variants", action="store_true",
                        help="skip the runs without first-token flush and without batching")
    parser.add_argument("--keep", action="store_true", help="keep the database and logs")
    parser.add_argument("--workers", type=int, default=1,
                        help="Celery worker processes (services mode), the sessions' threads "
                             "split between them (default 1)")
    parser.add_argument("--switch-ms", type=float, default=None,
                        help="HERMES_SWITCH_INTERVAL_MS for the servers (default: settings', "
                             "1 ms; 5 is Python's own)")
    parser.add_argument("--profile", metavar="DIR", default="",
                        help="sample daphne and the worker with py-spy (HERMES_BENCH_PYSPY or "
                             "py-spy on PATH) during the measured turns; stacks into DIR")
    args = parser.parse_args()
    spy = ""
    if args.profile:
        spy = os.environ.get("HERMES_BENCH_PYSPY") or shutil.which("py-spy") or ""
        if not spy:
            parser.error("--profile needs py-spy (set HERMES_BENCH_PYSPY)")
        Path(args.profile).mkdir(parents=True, exist_ok=True)
    if not 1 <= args.sessions <= 26 * 26:
        parser.error("--sessions must be between 1 and 676")

    from simulator import SimulatorServer

    stamp_sends()
    sim = SimulatorServer(host="127.0.0.1", port=0, script=stream_policy).start()
    bench = prepare_environment(f"stream_{os.getpid()}", simulator_url=sim.url,
                                use_redis=True, extra={"HERMES_RETRY_BASE_DELAY": "0.2"})
    runs = [Run("default (50 ms window, first-token flush)",
                {"HERMES_DELTA_BATCH_MS": "50", "HERMES_FIRST_DELTA_FLUSH": "1"})]
    if not args.no_variants:
        runs += [Run("no-flush (50 ms window, first delta batched too)",
                     {"HERMES_DELTA_BATCH_MS": "50", "HERMES_FIRST_DELTA_FLUSH": "0"}),
                 Run("unbatched (window 0: an event per token)",
                     {"HERMES_DELTA_BATCH_MS": "0", "HERMES_FIRST_DELTA_FLUSH": "1"})]
    if args.switch_ms is not None:
        for run in runs:
            run.overrides["HERMES_SWITCH_INTERVAL_MS"] = str(args.switch_ms)
    try:
        started = time.monotonic()
        django_boot()
        from django.contrib.auth import get_user_model
        from django.test import Client

        user = get_user_model().objects.create_user("bench", password="bench-pw")
        client = Client()
        client.force_login(user, backend="django.contrib.auth.backends.ModelBackend")
        cookie = client.cookies["sessionid"].value
        mode = ("services: daphne + celery worker subprocesses, Redis " + bench.redis_url
                if bench.redis_url else "embedded: daphne subprocess with worker threads, "
                "in-memory channel layer")
        print(f"hermes stream benchmark: {args.sessions} sessions; {mode}; {bench.database}; "
              f"simulator {sim.url}; setup {time.monotonic() - started:.1f} s")
        limit, used = connections_free()
        if limit:
            print(f"  PostgreSQL connections: {used} open of max_connections {limit}; the run "
                  f"needs about {args.sessions + 10} more (a worker thread per session, "
                  f"daphne's threads)")
        for number, run in enumerate(runs):
            run_config(run, bench=bench, user=user, cookie=cookie, count=args.sessions,
                       cold=args.cold, floor=number == 0, profile=spy,
                       profile_dir=args.profile, workers=args.workers)
            print(f"  {run.label}: {run.wall:.1f} s; cores busy {run.cpu[0]:.2f} of "
                  f"{os.cpu_count()} (this process {run.cpu[1]:.2f}, daphne "
                  f"{run.cpu[2]:.2f}, worker {sum(run.cpu[3:]):.2f}; "
                  f"PostgreSQL, Redis and anything else: the rest); load average "
                  f"{os.getloadavg()[0]:.1f}; by command: "
                  + ", ".join(f"{n} {c:.2f}" for n, c in run.cpu_top)
                  + (f" (warm-up turn, not measured: {run.warm})" if run.warm else ""))
        report(runs, args.sessions, verbose=args.sessions <= SESSIONS)
    finally:
        sim.stop()
        if not args.keep:
            bench.cleanup()
    return 0


def report(runs: list[Run], count: int, *, verbose: bool) -> None:
    main_run = runs[0]
    fig = figures(main_run)
    rows = fig.rows if verbose else [r for r in fig.rows
                                      if r[3] or r[4] or r[8] or r[9] != "yes"]
    if rows:
        print_table(f"Per session{'' if verbose else ' (those with a loss only)'}, "
                    f"{main_run.label} (delay in ms)",
                    ("session", "sent", "received", "lost", "dup", "p50", "p95",
                     "text.delta", "seq gaps", "text equal", "ended", "other frames"), rows)
    stored: list[float] = []
    committed: list[float] = []
    published: list[float] = []
    delivered: list[float] = []
    relayed: list[float] = []
    for watch in main_run.watches:
        for word, (ts, received) in watch.stages.items():
            if word in main_run.sent_wall and ts:
                stored.append((ts - main_run.sent_wall[word]) * 1000)
                delivered.append((received - ts) * 1000)
                if word in main_run.published:
                    handed, at_redis = main_run.published[word]
                    committed.append((handed - ts) * 1000)
                    published.append((at_redis - handed) * 1000)
                    relayed.append((received - at_redis) * 1000)
    stage_rows = [("token sent -> its text.delta stored (worker: read, batch, INSERT)",
                   stored),
                  ("stored -> frame at the socket (commit, publish, layer, daphne)", delivered)]
    if published:
        stage_rows += [("  stored -> handed to the publisher (INSERT round trip, commit)",
                        committed),
                       ("  handed -> PUBLISH at Redis (publisher thread, pipeline)",
                        published),
                       ("  at Redis -> frame at the socket (layer, consumer, daphne)", relayed)]
    print_table("Where the delay is (ms; wall clocks of one machine)",
                ("stage", "p50", "p95", "max"),
                [(name, percentile(v, 50), percentile(v, 95), max(v) if v else float("nan"))
                 for name, v in stage_rows])

    target = target_for(count)
    starts = [(min(sent.values()) - main_run.started_ns) / 1e6
              for sent in (session_sent(main_run.sent, w.index) for w in main_run.watches)
              if sent]
    p50, p95 = percentile(fig.delays, 50), percentile(fig.delays, 95)
    floor = floor_delays(main_run)
    f50, f95 = percentile(floor, 50), percentile(floor, 95)
    ratio = p95 / f95 if floor and f95 > 0 else float("nan")
    floor_tokens = sum(len(session_sent(main_run.floor_sent, w.index)) for w in main_run.floor)
    floor_lost = floor_tokens - len(floor)
    expected_tokens = count * (FIRST_TOKENS + FINAL_TOKENS)
    print_table(f"All {count} sessions streaming at once, {main_run.label} "
                f"({TOKEN_DELAY * 1000:.0f} ms per token; {main_run.wall:.1f} s)",
                ("figure", "measured", "target", "verdict"), [
                    ("token -> socket delay p50 (ms)", p50, "", ""),
                    ("token -> socket delay p95 (ms)", p95, f"< {target:.0f}",
                     verdict(p95 < target)),
                    ("token -> socket delay max (ms)", max(fig.delays) if fig.delays
                     else float("nan"), "", ""),
                    ("time to first token p50 (ms)", percentile(fig.ttft, 50), "", ""),
                    ("time to first token p95 (ms)", percentile(fig.ttft, 95), "", ""),
                    ("  TTFT p50 / p95, first reply (turn start)",
                     f"{percentile(fig.ttft_by_reply[0], 50):.1f} / "
                     f"{percentile(fig.ttft_by_reply[0], 95):.1f}", "", ""),
                    ("  TTFT p50 / p95, second reply (after the tool)",
                     f"{percentile(fig.ttft_by_reply[1], 50):.1f} / "
                     f"{percentile(fig.ttft_by_reply[1], 95):.1f}", "", ""),
                    ("first token sent after the message p50 / max (ms)",
                     f"{percentile(starts, 50):.1f} / {max(starts, default=float('nan')):.1f}",
                     "", ""),
                    ("text.delta events per reply (writes)", fig.deltas_per_reply, "", ""),
                    ("floor: bare PUBLISH -> socket p50 (ms)", f50, "", ""),
                    ("floor: bare PUBLISH -> socket p95 (ms)", f95, "", ""),
                    ("ratio: delay p95 / floor p95", ratio, "", ""),
                    ("floor tokens lost", floor_lost, "0", verdict(floor_lost == 0)),
                    ("tokens sent (simulator)", len(main_run.sent), f"{expected_tokens}",
                     verdict(len(main_run.sent) == expected_tokens)),
                    ("tokens lost / extra / duplicated", fig.lost, "0", verdict(fig.lost == 0)),
                    ("event seq gaps or repeats", fig.gaps, "0", verdict(fig.gaps == 0)),
                    ("final texts differing from sent", fig.mismatched, "0",
                     verdict(fig.mismatched == 0)),
                    ("turns finished", fig.finished, f"{count}", verdict(fig.finished == count)),
                    ("error frames", fig.errors, "0", verdict(fig.errors == 0)),
                    ("connections refused by PostgreSQL (too many clients)",
                     main_run.refused, "0", verdict(main_run.refused == 0)),
                ])
    all_figs = [(run, fig if run is main_run else figures(run)) for run in runs]
    if len(runs) > 1:
        print_table("Batching and the first-token flush (same sessions, same stream; each "
                    "configuration on fresh servers)",
                    ("configuration", "text.delta/reply", "per s streamed",
                     "events/session", "delay p50",
                     "delay p95", "TTFT p50", "TTFT p95", "lost"),
                    [(run.label, f.deltas_per_reply, f.writes_per_second, f.events_per_session,
                      percentile(f.delays, 50), percentile(f.delays, 95),
                      percentile(f.ttft, 50), percentile(f.ttft, 95), f.lost)
                     for run, f in all_figs])
    ok_loss = fig.lost == 0 and fig.gaps == 0 and fig.mismatched == 0 and fig.finished == count
    print(f"\n  STREAM DELAY {verdict(p95 < target)}: p95 {p95:.1f} ms (p50 {p50:.1f}; target "
          f"< {target:.0f} ms with {count} sessions); FLOOR p95 {f95:.1f} ms (p50 {f50:.1f}); "
          f"RATIO {ratio:.2f}")
    print(f"  EVENTS LOST {verdict(ok_loss)}: {fig.lost} tokens, {fig.gaps} seq gaps, "
          f"{fig.mismatched} texts differ, {count - fig.finished} turns unfinished"
          + (f" ({main_run.refused} database connections refused: too many clients)"
             if main_run.refused else ""))
    by_name = {run.label.split()[0]: f for run, f in all_figs}
    if "unbatched" in by_name:
        raw = by_name["unbatched"]
        print(f"  BATCHING COST (50 ms window vs none): delay p50 "
              f"{p50 - percentile(raw.delays, 50):+.1f} ms, p95 "
              f"{p95 - percentile(raw.delays, 95):+.1f} ms; writes {fig.deltas_per_reply:.1f} vs "
              f"{raw.deltas_per_reply:.1f} text.delta events per reply "
              f"({raw.deltas_per_reply / max(fig.deltas_per_reply, 1e-9):.1f}x fewer)")
    if "no-flush" in by_name:
        batched = by_name["no-flush"]
        gain = percentile(batched.ttft, 50) - percentile(fig.ttft, 50)
        extra = fig.deltas_per_reply - batched.deltas_per_reply
        print(f"  FIRST-TOKEN FLUSH: TTFT p50 {percentile(fig.ttft, 50):.1f} vs "
              f"{percentile(batched.ttft, 50):.1f} ms batched (saves {gain:.1f} ms; p95 "
              f"{percentile(fig.ttft, 95):.1f} vs {percentile(batched.ttft, 95):.1f}) for "
              f"{extra:+.2f} text.delta writes per reply ({fig.writes_per_second:.1f} vs "
              f"{batched.writes_per_second:.1f} per second streamed; by construction +1 per "
              f"reply: tests/sessions/test_streaming.py)")


if __name__ == "__main__":
    sys.exit(main())
