"""Fixtures for the simulator-facing tests: one simulator per module, reset per test, and a
real anthropic SDK client pointed at it (max_retries=0: the tests count requests)."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import pytest

from simulator import SimulatorServer


@pytest.fixture(scope="module")
def server() -> Iterator[SimulatorServer]:
    sim = SimulatorServer().start()
    yield sim
    sim.stop()


@pytest.fixture
def sim(server: SimulatorServer) -> SimulatorServer:
    server.state.reset()
    return server


@pytest.fixture
def client(sim: SimulatorServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=sim.url, api_key="sim-key", max_retries=0)
