"""Services mode for real: a Celery worker consuming from Redis runs the turn that the web
side enqueued on commit, and the events it publishes reach the Redis channel layer."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer

from sessions.events import session_group
from sessions.models import Turn
from sessions.services import session_create, turn_start

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def redis_worker(settings):
    """A real Celery worker (thread pool) consuming from the Redis broker in REDIS_URL."""
    from celery.contrib.testing.worker import start_worker

    from hermes_web.celery import app

    assert settings.CELERY_BROKER_URL.startswith("redis://"), "services tests need REDIS_URL"
    app.control.purge()  # tasks left by tests that enqueue without a worker
    with start_worker(app, pool="threads", concurrency=2, perform_ping_check=False,
                      shutdown_timeout=30) as worker:
        yield worker


def test_a_turn_enqueued_on_commit_runs_on_a_redis_worker(make_user, hermes_settings,
                                                          redis_worker):
    hermes_settings.HERMES = {**hermes_settings.HERMES, "BACKEND": "local"}
    user = make_user("dora")
    session = session_create(user=user)
    layer = get_channel_layer()

    async def scenario() -> list[str]:
        # Subscribe first (the pub/sub layer is fire-and-forget), then start the turn.
        channel = await layer.new_channel()
        await layer.group_add(session_group(session.pk), channel)
        await sync_to_async(turn_start)(session=session, user=user,
                                        text="list the files and read README.md")
        seen: list[str] = []
        while not seen or seen[-1] != "turn.finished":
            message = await asyncio.wait_for(layer.receive(channel), timeout=60)
            batch = message["events"] if message["type"] == "run.events" else [message["event"]]
            seen.extend(event["type"] for event in batch)
        return seen

    seen = async_to_sync(scenario)()
    turn = Turn.objects.get(session=session)
    assert turn.status == Turn.Status.COMPLETED, turn.error
    assert "tool.called" in seen and "tool.result" in seen and seen[-1] == "turn.finished"
